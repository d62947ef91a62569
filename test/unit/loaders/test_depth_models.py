"""Depth models end to end on random weights: loaders, export, backend parity, offline.

Both families are built with their real architectures (see ``depth_weights``) and saved the
way a user's weights are: an Ultralytics ``.pt`` and transformers ``save_pretrained``
folders. Nothing here checks accuracy; it checks shapes, units, plumbing and that every
backend serving a model gives the same depth. Tolerances: raw outputs of PyTorch and ONNX
Runtime agree to 1e-4 relative (fp32 kernels of two runtimes), final maps likewise.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip('torch', reason='PyTorch is not installed')
pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')
pytest.importorskip('transformers', reason='transformers is not installed')
pytest.importorskip('ultralytics', reason='ultralytics is not installed')

from depth_weights import (  # noqa: E402
    IMAGENET,
    depth_anything_folder,
    shared_folder,
    yolo_depth_pt,
)
from vision_nodes.artifacts.onnx_export import ONNX_FILE, weights_sha256  # noqa: E402
from vision_nodes.loaders import ModelLoadError, load_torch_module  # noqa: E402
from vision_nodes.tasks import parse_manifest, resolve_manifest  # noqa: E402
from vision_nodes.pipeline import build_pipeline  # noqa: E402
from vision_nodes.tasks.depth import DepthParams  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
#: Backends besides PyTorch that serve depth here; OpenVINO joins when its runner exists.
OTHER_BACKENDS = ['onnx', 'openvino']


def _skip_missing_runner(backend: str) -> None:
    if backend == 'openvino' and \
            importlib.util.find_spec('vision_nodes.runners.openvino_runner') is None:
        pytest.skip('no openvino runner in this tree')


def _da_manifest(folder: Path, kind: str = 'relative', size=(70, 98), **depth):
    return parse_manifest({
        'name': f'da_tiny_{kind}', 'task': 'depth', 'weights': str(folder),
        'architecture': 'transformers', 'input_size': list(size),
        'preprocessing': {'letterbox': False, 'interpolation': 'cubic', **IMAGENET},
        'depth': {'kind': kind, **depth}, 'backends': ['cpu', 'onnx', 'openvino'],
    }, 'test-da.yaml')


def _yolo_manifest(path: Path, task: str = 'depth'):
    data = {'name': 'yolo26n_depth_random', 'task': task, 'weights': str(path),
            'architecture': 'ultralytics', 'input_size': [192, 256],
            'preprocessing': {'letterbox': False}, 'backends': ['cpu', 'onnx', 'openvino']}
    if task == 'depth':
        data['depth'] = {'kind': 'metric'}
    return parse_manifest(data, 'test-yolo.yaml')


@pytest.fixture(scope='session')
def weights_dir(tmp_path_factory) -> Path:
    return shared_folder(tmp_path_factory)


@pytest.fixture(scope='session')
def tiny_relative(weights_dir) -> Path:
    return depth_anything_folder(weights_dir / 'da_tiny_relative')


@pytest.fixture(scope='session')
def tiny_metric(weights_dir) -> Path:
    return depth_anything_folder(weights_dir / 'da_tiny_metric', metric=True, max_depth=20)


@pytest.fixture(scope='session')
def yolo_pt(weights_dir) -> Path:
    return yolo_depth_pt(weights_dir / 'yolo26n-depth-random.pt')


@pytest.fixture(scope='module')
def manifests(tiny_relative, tiny_metric, yolo_pt):
    return {'da_relative': _da_manifest(tiny_relative),
            'da_metric': _da_manifest(tiny_metric, 'metric', max_depth=20.0),
            'yolo': _yolo_manifest(yolo_pt)}


@pytest.fixture(scope='module')
def pipelines(manifests, engine_cache_dir):
    built: dict = {}

    def get(model: str, backend: str):
        key = (model, backend)
        if key not in built:
            _skip_missing_runner(backend)
            built[key] = build_pipeline(manifests[model], backend, cache_dir=engine_cache_dir)
        return built[key]

    yield get
    for pipeline in built.values():
        pipeline.close()


# -- backends agree --------------------------------------------------------------------------

@pytest.mark.parametrize('backend', OTHER_BACKENDS)
@pytest.mark.parametrize('model', ['da_relative', 'da_metric', 'yolo'])
def test_backends_agree_on_depth(pipelines, model, backend, bus_bgr):
    """Same tensor in, same depth out; same map at the source resolution."""
    torch_pipe, other = pipelines(model, 'cpu'), pipelines(model, backend)
    tensor, meta = torch_pipe.task.preprocess(bus_bgr, 'bgr8')
    raw_torch = torch_pipe.runner.infer(tensor)
    raw_other = other.runner.infer(tensor)
    height, width = torch_pipe.manifest.input_size
    assert len(raw_torch) == len(raw_other) == 1
    assert raw_torch[0].shape == raw_other[0].shape == (1, 1, height, width)
    assert np.ptp(raw_torch[0]) > 1e-3 * np.abs(raw_torch[0]).max()  # a real map, not flat
    np.testing.assert_allclose(raw_other[0], raw_torch[0], rtol=1e-4, atol=1e-6)
    params = DepthParams()
    a = torch_pipe.process(bus_bgr, 'bgr8', params)
    b = other.process(bus_bgr, 'bgr8', params)
    assert a.depth.shape == b.depth.shape == bus_bgr.shape[:2]
    assert a.depth.dtype == b.depth.dtype == np.float32
    assert a.metric == b.metric == (model != 'da_relative')
    np.testing.assert_array_equal(np.isnan(a.depth), np.isnan(b.depth))
    np.testing.assert_allclose(b.depth, a.depth, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize('model', ['da_metric', 'yolo'])
def test_openvino_takes_the_u8_image_for_depth(pipelines, model, bus_bgr):
    """The u8 image in, the manifest's scale, mean and std inside the model: the float path's
    map (Depth Anything normalises with ImageNet's mean and std, YOLO only scales)."""
    pipeline = pipelines(model, 'openvino')
    assert pipeline.runner.takes_u8 and pipeline.task.u8_input
    params = DepthParams()
    shape = pipeline.input_shape(bus_bgr.shape[:2])
    image, _ = pipeline.task.preprocess(bus_bgr, 'bgr8', shape)
    assert image.dtype == np.uint8 and image.shape == (1, *shape, 3)
    u8 = pipeline.process(bus_bgr, 'bgr8', params).depth
    pipeline.task.u8_input = False
    try:
        tensor, meta = pipeline.task.preprocess(bus_bgr, 'bgr8', shape)
        assert tensor.dtype == np.float32 and tensor.shape == (1, 3, *shape)
        host = pipeline.task.postprocess(pipeline.runner.infer(tensor), meta, params).depth
    finally:
        pipeline.task.u8_input = True
    assert np.ptp(host[np.isfinite(host)]) > 0  # a real map, not flat
    np.testing.assert_array_equal(np.isnan(u8), np.isnan(host))
    np.testing.assert_allclose(u8, host, rtol=1e-4, atol=1e-5 * np.nanmax(np.abs(host)))


def test_units_per_family(pipelines, bus_bgr):
    """Metric Depth Anything: (0, max_depth] metres; YOLO: positive metres; relative: >= 0."""
    params = DepthParams()
    metric = pipelines('da_metric', 'cpu').process(bus_bgr, 'bgr8', params).depth
    assert np.nanmin(metric) > 0 and np.nanmax(metric) <= 20.0
    yolo = pipelines('yolo', 'cpu').process(bus_bgr, 'bgr8', params).depth
    assert np.all(yolo > 0) and np.isfinite(yolo).all()
    relative = pipelines('da_relative', 'cpu').process(bus_bgr, 'bgr8', params)
    assert relative.output == 'disparity' and np.nanmin(relative.depth) >= 0


def test_depth_anything_is_never_letterboxed(pipelines):
    """Stretched to input_size: rect inference stays off even on a dynamic-shape runtime."""
    pipeline = pipelines('da_relative', 'cpu')
    assert not pipeline.rect
    pipeline.runner.dynamic_shapes = True
    try:
        assert not pipeline.rect
        assert pipeline.input_shape((1080, 810)) == (70, 98)
    finally:
        pipeline.runner.dynamic_shapes = False


def test_exported_graph_has_one_depth_output(pipelines):
    import onnx

    for model in ('da_relative', 'yolo'):
        pipeline = pipelines(model, 'onnx')
        assert pipeline.runner.labels is None and pipeline.labels == []
        graph = onnx.load(str(pipeline.runner.model_path)).graph
        assert [o.name for o in graph.output] == ['depth']
        assert [i.name for i in graph.input] == ['images']
        assert pipeline.runner.model_path.name == ONNX_FILE


def test_matches_ultralytics_predict_but_for_the_last_resize(pipelines, yolo_pt, bus_bgr):
    """Ultralytics' own predictor on the same .pt: same input tensor, same network output.

    Its last step resizes with corners aligned; ours with OpenCV's pixel centres, which is the
    exact inverse of the input resize (test_depth_task). Resizing our network output its way
    gives its map.
    """
    import torch
    import torch.nn.functional as F
    from vision_nodes.loaders.ultralytics import import_ultralytics

    pipeline = pipelines('yolo', 'cpu')
    model = import_ultralytics().YOLO(str(yolo_pt))
    ref = model.predict(bus_bgr, imgsz=[192, 256], verbose=False, device='cpu')[0]
    ref_depth = ref.depth.data.cpu().numpy()
    assert ref_depth.shape == bus_bgr.shape[:2]
    ref_tensor = model.predictor.preprocess([bus_bgr]).cpu().numpy()
    tensor, _ = pipeline.task.preprocess(bus_bgr, 'bgr8')
    np.testing.assert_allclose(tensor, ref_tensor, atol=1e-6)
    raw = pipeline.runner.infer(tensor)[0]
    theirs = F.interpolate(torch.from_numpy(raw), size=bus_bgr.shape[:2], mode='bilinear',
                           align_corners=True)[0, 0].numpy()
    np.testing.assert_allclose(ref_depth, theirs, rtol=1e-4)
    ours = pipeline.process(bus_bgr, 'bgr8', DepthParams()).depth
    relative = np.abs(ours - ref_depth) / ref_depth
    assert np.median(relative) < 1e-3


# -- the real Depth Anything V2 Small configuration ------------------------------------------

@pytest.fixture(scope='module')
def small_folder(weights_dir) -> Path:
    return depth_anything_folder(weights_dir / 'depth_anything_v2_small', small=True)


def test_depth_anything_v2_small_config_through_the_shipped_manifest(
        small_folder, engine_cache_dir, bus_bgr):
    """The shipped manifest, the real ViT-S/14 configuration, 518 x 518: PyTorch == ONNX."""
    manifest = resolve_manifest('depth_anything_v2_small')
    module, labels = load_torch_module(manifest, small_folder)
    config = module.inner.config
    assert labels is None
    assert (config.backbone_config.hidden_size, config.backbone_config.num_hidden_layers,
            list(config.backbone_config.out_indices)) == (384, 12, [3, 6, 9, 12])
    assert (list(config.neck_hidden_sizes), config.fusion_hidden_size, config.patch_size) == (
        [48, 96, 192, 384], 64, 14)
    assert 24_000_000 < sum(p.numel() for p in module.parameters()) < 25_500_000
    del module
    results = {}
    for backend in ('cpu', 'onnx'):
        pipeline = build_pipeline(manifest, backend, model_dir=str(small_folder.parent),
                                  cache_dir=engine_cache_dir)
        try:
            tensor, meta = pipeline.task.preprocess(bus_bgr, 'bgr8')
            assert tensor.shape == (1, 3, 518, 518)
            raw = pipeline.runner.infer(tensor)  # one run per backend: the slow part
            results[backend] = (raw[0], pipeline.task.postprocess(raw, meta, DepthParams()))
        finally:
            pipeline.close()
    (raw_torch, a), (raw_onnx, b) = results['cpu'], results['onnx']
    assert raw_torch.shape == raw_onnx.shape == (1, 1, 518, 518)
    np.testing.assert_allclose(raw_onnx, raw_torch, rtol=1e-3, atol=1e-4 * raw_torch.max())
    assert a.depth.shape == bus_bgr.shape[:2] and not a.metric
    np.testing.assert_allclose(b.depth, a.depth, rtol=1e-3, atol=1e-4 * raw_torch.max())


# -- loader errors ---------------------------------------------------------------------------

def _copy_folder(source: Path, target: Path) -> Path:
    target.mkdir()
    for path in source.iterdir():
        (target / path.name).symlink_to(path)
    return target


def test_weights_folder_errors_are_clear(tiny_relative, tmp_path):
    manifest = _da_manifest(tiny_relative)
    with pytest.raises(ModelLoadError, match='not found: set the `model_dir`'):
        load_torch_module(manifest, tmp_path / 'missing')
    (tmp_path / 'file').write_text('x')
    with pytest.raises(ModelLoadError, match='not a file'):
        load_torch_module(manifest, tmp_path / 'file')
    bad = tmp_path / 'bad'
    bad.mkdir()
    with pytest.raises(ModelLoadError, match='config.json: cannot read config.json'):
        load_torch_module(manifest, bad)
    (bad / 'config.json').write_text('{not json')
    with pytest.raises(ModelLoadError, match='not valid JSON'):
        load_torch_module(manifest, bad)
    (bad / 'config.json').write_text('[1, 2]')
    with pytest.raises(ModelLoadError, match='JSON object'):
        load_torch_module(manifest, bad)
    (bad / 'config.json').write_text(json.dumps({'model_type': 'bert\x1b[2J'}))
    with pytest.raises(ModelLoadError, match='not served') as info:
        load_torch_module(manifest, bad)
    assert '\x1b' not in str(info.value)  # untrusted text is escaped
    (bad / 'config.json').write_text((tiny_relative / 'config.json').read_text())
    (bad / 'pytorch_model.bin').write_bytes(b'pickle')
    with pytest.raises(ModelLoadError, match='no model.safetensors'):
        load_torch_module(manifest, bad)
    (bad / 'model.safetensors').write_bytes(
        (tiny_relative / 'model.safetensors').read_bytes()[:1000])
    with pytest.raises(ModelLoadError, match='model.safetensors.* not a (valid )?safetensors'):
        load_torch_module(manifest, bad)


def test_manifest_and_config_must_agree(tiny_relative, tiny_metric):
    with pytest.raises(ModelLoadError, match="relative depth model .* says depth.kind 'metric'"):
        load_torch_module(_da_manifest(tiny_relative, 'metric'), tiny_relative)
    with pytest.raises(ModelLoadError, match="metric depth model .* says depth.kind 'relative'"):
        load_torch_module(_da_manifest(tiny_metric, 'relative'), tiny_metric)
    with pytest.raises(ModelLoadError, match='max_depth is 20 but .*max_depth 80.0'):
        load_torch_module(_da_manifest(tiny_metric, 'metric', max_depth=80.0), tiny_metric)
    with pytest.raises(ModelLoadError, match='set depth.output: disparity'):
        load_torch_module(_da_manifest(tiny_relative, output='depth'), tiny_relative)
    # max_depth may be left out: the model's own applies.
    module, _ = load_torch_module(_da_manifest(tiny_metric, 'metric'), tiny_metric)
    assert module.inner.config.max_depth == 20.0


@pytest.mark.parametrize('kind,value,problem', [
    ('metric', -20, 'config.json max_depth -20 is not positive'),
    ('metric', 0, 'config.json max_depth 0 is not positive'),
    ('metric', 10 ** 7, 'config.json max_depth 10000000 is larger than 1e+06'),
    ('relative', -1, 'config.json max_depth -1 is not positive'),
    # Not an integer: transformers' own config validation may refuse it first.
    ('metric', float('nan'), 'max_depth'),
    ('metric', 'far', 'max_depth'),
], ids=['negative', 'zero', 'huge', 'relative negative', 'nan', 'string'])
def test_model_depth_range_must_be_positive_and_finite(tiny_metric, tiny_relative, tmp_path,
                                                       engine_cache_dir, kind, value, problem):
    """config.json max_depth scales Depth Anything's output: a negative one made every metric
    pixel NaN (a relative map flipped) without a word. Refused at configure, in one line,
    also when the manifest leaves depth.max_depth out."""
    source = tiny_metric if kind == 'metric' else tiny_relative
    folder = tmp_path / 'bad_range'
    folder.mkdir()
    (folder / 'model.safetensors').symlink_to(source / 'model.safetensors')
    config = json.loads((source / 'config.json').read_text())
    config['max_depth'] = value
    (folder / 'config.json').write_text(json.dumps(config))
    manifest = _da_manifest(folder, kind)
    with pytest.raises(ModelLoadError) as info:
        build_pipeline(manifest, 'cpu', cache_dir=engine_cache_dir)
    message = str(info.value)
    assert problem in message and '\n' not in message


def test_task_and_weights_must_agree(yolo_pt, tmp_path, engine_cache_dir):
    with pytest.raises(ModelLoadError, match="holds a depth model but .* task 'detect'"):
        load_torch_module(_yolo_manifest(yolo_pt, task='detect'), yolo_pt)
    detector = tmp_path / 'det.pt'
    from vision_nodes.loaders.ultralytics import import_ultralytics

    import_ultralytics().YOLO('yolov8n.yaml').save(str(detector))
    manifest = _yolo_manifest(detector)
    with pytest.raises(ModelLoadError, match="holds a detect model but .* task 'depth'"):
        load_torch_module(manifest, detector)
    # The same error on the export path (backend onnx).
    with pytest.raises(ModelLoadError, match='holds a detect model'):
        build_pipeline(manifest, 'onnx', cache_dir=engine_cache_dir)


def test_folder_hash_covers_every_file(tiny_relative, tmp_path):
    copy = _copy_folder(tiny_relative, tmp_path / 'copy')
    first = weights_sha256(copy)
    assert first == weights_sha256(tiny_relative)  # content, not location
    (copy / 'config.json').unlink()
    (copy / 'config.json').write_text((tiny_relative / 'config.json').read_text() + '\n')
    assert weights_sha256(copy) != first
    empty = tmp_path / 'empty'
    empty.mkdir()
    with pytest.raises(ModelLoadError, match='is empty'):
        weights_sha256(empty)


# -- nothing downloads -----------------------------------------------------------------------

OFFLINE_SCRIPT = textwrap.dedent('''
    import json, sys
    import numpy as np
    from vision_nodes.tasks import parse_manifest
    from vision_nodes.pipeline import build_pipeline
    shapes = []
    for data in json.loads(sys.argv[1]):
        pipeline = build_pipeline(parse_manifest(data), 'cpu')
        image = np.full((60, 80, 3), 120, np.uint8)
        shapes.append(list(pipeline.process(image, 'rgb8', None).depth.shape))
        pipeline.close()
    print(json.dumps(shapes))
''')


def test_nothing_is_downloaded(tiny_metric, yolo_pt, tmp_path):
    """Hub offline, an empty HF_HOME and HOME: both families load, nothing is written there."""
    hf_home, home, work = tmp_path / 'hf_home', tmp_path / 'home', tmp_path / 'work'
    for folder in (hf_home, home, work):
        folder.mkdir()
    env = dict(os.environ, HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1', HF_HOME=str(hf_home),
               HOME=str(home), XDG_CACHE_HOME=str(home / '.cache'), YOLO_OFFLINE='1',
               YOLO_CONFIG_DIR=str(tmp_path / 'yolo_config'),
               VISION_NODES_CACHE_DIR=str(tmp_path / 'engines'),
               HF_ENDPOINT='http://127.0.0.1:9', PYTHONPATH=str(ROOT) + os.pathsep +
               os.environ.get('PYTHONPATH', ''))
    manifests = []
    for manifest_data in (
            {'name': 'da', 'task': 'depth', 'weights': str(tiny_metric),
             'architecture': 'transformers', 'input_size': [56, 70],
             'preprocessing': {'letterbox': False, **IMAGENET},
             'depth': {'kind': 'metric'}, 'backends': ['cpu']},
            {'name': 'yolo', 'task': 'depth', 'weights': str(yolo_pt), 'input_size': 64,
             'preprocessing': {'letterbox': False}, 'depth': {'kind': 'metric'},
             'backends': ['cpu']}):
        manifests.append(manifest_data)
    result = subprocess.run([sys.executable, '-c', OFFLINE_SCRIPT, json.dumps(manifests)],
                            cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [[60, 80], [60, 80]]
    assert list(hf_home.rglob('*')) == []
    assert list(work.iterdir()) == []
    assert not (home / '.cache' / 'huggingface').exists()
