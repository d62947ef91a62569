"""A reduced precision through the node: named as it runs, measured against fp32, budgeted.

On a CPU with native bf16 OpenVINO's ``fp16`` computes in bf16: ``precision_in_use``, the
configure log and ``/diagnostics`` say bf16, with its agreement with fp32 on the default
validation set; the manifest's ``accuracy`` budget makes ``auto`` take fp32 instead, and
refuses an explicit precision below it with ``strict``. On a CPU without bf16 ``auto`` runs
fp32 and there is nothing to measure.
"""

from __future__ import annotations

import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('openvino', reason='OpenVINO is not installed')
pytest.importorskip('pycocotools', reason='pycocotools is not installed (requirements/)')

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402

from node_harness import Harness, manifest_copy  # noqa: E402
from vision_nodes.artifacts.validation import MIN_VALIDATION_IMAGES, package_images  # noqa: E402,E501
from vision_nodes.platform.openvino import fast_reduced_type  # noqa: E402

BF16 = fast_reduced_type('CPU') == 'bf16'
#: The default validation set here (Ultralytics' two photographs and eight of scikit-image).
IMAGES = len(package_images())


def _agreement(h: Harness) -> str:
    """The 'precision agreement' value of the node's next status."""
    statuses = h.client.subscribe(DiagnosticArray, '/diagnostics', 10)
    msg = statuses.get(30.0, lambda m: any(s.name == '/vn_precision' for s in m.status))
    assert msg is not None, h.node.output()[-2000:]
    status = next(s for s in msg.status if s.name == '/vn_precision')
    return {kv.key: kv.value for kv in status.values}['precision agreement']


@pytest.fixture(scope='module')
def budgets(tmp_path_factory):
    folder = tmp_path_factory.mktemp('budgets')
    return {'default': manifest_copy(folder, 'v8n_default'),
            'zero': manifest_copy(folder, 'v8n_zero', accuracy={'max_drop': 0.0}),
            'strict': manifest_copy(folder, 'v8n_strict',
                                    accuracy={'max_drop': 0.0, 'strict': True})}


def test_the_type_that_runs_its_agreement_and_the_budget(model_dir, engine_cache_dir, budgets):
    if IMAGES < MIN_VALIDATION_IMAGES:
        pytest.skip(f'the default validation set has {IMAGES} images here (scikit-image not '
                    'installed: requirements/validation.txt)')
    h = Harness({'model': budgets['default'], 'model_dir': str(model_dir),
                 'engine_cache_dir': str(engine_cache_dir), 'backend': 'openvino'},
                'vn_precision')
    c = h.client
    try:
        assert c.change_state('configure', timeout=600), h.node.output()[-2000:]
        used = c.get_parameters('precision_in_use')['precision_in_use']
        agreement = _agreement(h)
        if not BF16:  # the AVX2-only EPYC: auto is fp32, nothing to measure
            assert used == 'fp32' and agreement == 'fp32 (nothing to measure)'
            return
        assert used == 'bf16'
        words = f'box mAP50-95 of fp32 on {IMAGES} images'
        assert agreement.startswith('v8n_default: bf16 ') and words in agreement, agreement
        assert 'precision bf16: ' in h.node.output() and words in h.node.output()
        value = float(agreement.split()[2])
        assert value >= 0.95, agreement  # the default budget, met by bf16 YOLOv8n
        assert c.change_state('cleanup')

        # max_drop 0: auto takes fp32, says why, and diagnostics still show the measure.
        assert all(r.successful for r in c.set_parameters(model=budgets['zero']))
        assert c.change_state('configure', timeout=600), h.node.output()[-2000:]
        assert c.get_parameters('precision_in_use')['precision_in_use'] == 'fp32'
        assert "precision auto: model 'v8n_zero': not 'bf16': accuracy.max_drop 0 asks for " \
            "fp32's answers; running fp32" in h.node.output()
        assert _agreement(h).endswith('below its budget: runs fp32')
        assert c.change_state('cleanup')

        # An explicit bf16 below a strict budget is refused in one line; the node lives on.
        assert all(r.successful for r in c.set_parameters(model=budgets['strict'],
                                                          precision='fp16'))
        assert not c.change_state('configure', timeout=600)
        refusal = [line for line in h.node.output().splitlines()
                   if 'accuracy: {strict: true}' in line]
        assert refusal and "model 'v8n_strict': precision bf16: accuracy.max_drop 0" \
            in refusal[-1], h.node.output()[-2000:]
        assert all(r.successful for r in c.set_parameters(model=budgets['default']))
        assert c.change_state('configure', timeout=600)
    finally:
        h.close()
