"""A fake ``tensorrt`` module and a fake CUDA runtime, for tests on machines without either.

TensorRT and an NVIDIA GPU cannot exist on the machines these tests run on. The fakes follow
the TensorRT 10.x Python API the runner uses (tensors by name, ``execute_async_v3``,
``IInt8EntropyCalibrator2``, ``IProgressMonitor``) and cuda-python's runtime calls, and record
every call. Device memory is real host memory behind fake addresses; copies to and from it
move real bytes (``ctypes`` on the host side), so a runner that copies the wrong array, size
or address gets wrong results. The fake "engine" runs the ONNX model it was built from with
ONNX Runtime on the CPU, so outputs are the model's real outputs.

Installed only inside tests, through ``monkeypatch.setitem(sys.modules, ...)``.
"""

from __future__ import annotations

import ctypes
import enum
import hashlib
import json
import types
from typing import Any

import numpy as np
import onnxruntime as ort


class CudaErr(enum.IntEnum):
    cudaSuccess = 0
    cudaErrorInvalidValue = 1
    cudaErrorMemoryAllocation = 2
    cudaErrorNoDevice = 100
    cudaErrorInvalidDevice = 101


class MemcpyKind(enum.IntEnum):
    cudaMemcpyHostToDevice = 1
    cudaMemcpyDeviceToHost = 2


class FakeStream:
    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __int__(self) -> int:
        return self.handle


class CudaState:
    """What the fake CUDA runtime holds: GPUs, the current one, allocations and streams."""

    def __init__(self, gpus: list[dict[str, Any]]) -> None:
        self.gpus = gpus
        self.device = 0
        self.memory: dict[int, bytearray] = {}
        self.streams: set[int] = set()
        self.next_pointer = 0x7F0000000000
        self.calls: list[tuple] = []
        self.freed: list[int] = []

    def find(self, pointer: int, count: int) -> tuple[bytearray, int]:
        for base, block in self.memory.items():
            if base <= pointer and pointer + count <= base + len(block):
                return block, pointer - base
        raise AssertionError(f'no device allocation holds {count} bytes at {pointer:#x}')


def make_fake_cudart(gpus: list[dict[str, Any]] | None = None) -> types.ModuleType:
    """Return a module with the cuda-python runtime calls the package uses."""
    if gpus is None:
        gpus = [{'name': 'NVIDIA Fake RTX 4090', 'cc': (8, 9), 'memory': 24 << 30}]
    state = CudaState(gpus)
    rt = types.ModuleType('cuda.bindings.runtime')
    rt.state = state
    rt.cudaError_t = CudaErr
    rt.cudaMemcpyKind = MemcpyKind
    ok = CudaErr.cudaSuccess

    def record(name, *args):
        state.calls.append((name,) + args)

    def cudaGetDeviceCount():
        record('cudaGetDeviceCount')
        if not state.gpus:
            return (CudaErr.cudaErrorNoDevice, None)
        return (ok, len(state.gpus))

    def cudaGetDeviceProperties(index):
        if index >= len(state.gpus):
            return (CudaErr.cudaErrorInvalidDevice, None)
        gpu = state.gpus[index]
        props = types.SimpleNamespace(name=gpu['name'].encode() + b'\0' * 8,
                                      major=gpu['cc'][0], minor=gpu['cc'][1],
                                      totalGlobalMem=gpu['memory'])
        return (ok, props)

    def cudaGetDevice():
        return (ok, state.device)

    def cudaSetDevice(index):
        record('cudaSetDevice', index)
        if index >= len(state.gpus):
            return (CudaErr.cudaErrorInvalidDevice,)
        state.device = index
        return (ok,)

    def cudaMemGetInfo():
        total = state.gpus[state.device]['memory']
        used = sum(len(b) for b in state.memory.values()) + (1 << 30)
        return (ok, total - used, total)

    def cudaMalloc(nbytes):
        record('cudaMalloc', nbytes)
        pointer = state.next_pointer
        state.next_pointer += (nbytes + 0xFFFF) & ~0xFFFF
        state.memory[pointer] = bytearray(nbytes)
        return (ok, pointer)

    def cudaFree(pointer):
        record('cudaFree', pointer)
        if pointer not in state.memory:
            return (CudaErr.cudaErrorInvalidValue,)
        del state.memory[pointer]
        state.freed.append(pointer)
        return (ok,)

    def cudaStreamCreate():
        handle = 0x5000 + len(state.calls)
        state.streams.add(handle)
        record('cudaStreamCreate', handle)
        return (ok, FakeStream(handle))

    def cudaStreamDestroy(stream):
        record('cudaStreamDestroy', int(stream))
        state.streams.discard(int(stream))
        return (ok,)

    def cudaStreamSynchronize(stream):
        record('cudaStreamSynchronize', int(stream))
        return (ok,)

    def cudaDeviceSynchronize():
        return (ok,)

    def cudaMemcpyAsync(dst, src, count, kind, stream):
        record('cudaMemcpyAsync', kind, count)
        if kind == MemcpyKind.cudaMemcpyHostToDevice:
            block, offset = state.find(dst, count)
            block[offset:offset + count] = ctypes.string_at(src, count)
        else:
            block, offset = state.find(src, count)
            ctypes.memmove(dst, bytes(block[offset:offset + count]), count)
        return (ok,)

    def cudaGetErrorString(err):
        return (ok, f'fake CUDA error {CudaErr(err).name}'.encode())

    for func in (cudaGetDeviceCount, cudaGetDeviceProperties, cudaGetDevice, cudaSetDevice,
                 cudaMemGetInfo, cudaMalloc, cudaFree, cudaStreamCreate, cudaStreamDestroy,
                 cudaStreamSynchronize, cudaDeviceSynchronize, cudaMemcpyAsync,
                 cudaGetErrorString):
        setattr(rt, func.__name__, func)
    return rt


def read_device(rt: types.ModuleType, pointer: int, shape, dtype=np.float32) -> np.ndarray:
    """Copy of the array stored in fake device memory at ``pointer``."""
    count = int(np.prod(shape)) * np.dtype(dtype).itemsize
    block, offset = rt.state.find(pointer, count)
    return np.frombuffer(bytes(block[offset:offset + count]), dtype=dtype).reshape(shape)


def _session(onnx_bytes: bytes) -> ort.InferenceSession:
    return ort.InferenceSession(onnx_bytes, providers=['CPUExecutionProvider'])


def make_fake_tensorrt(cudart: types.ModuleType, version: str = '10.13.0.35', *,
                       weak_typing: bool = True) -> types.ModuleType:
    """Return a fake ``tensorrt`` module bound to the fake CUDA runtime ``cudart``.

    ``weak_typing=False`` imitates TensorRT 11: no FP16/INT8 builder flags and no int8
    calibrators (strongly typed networks only).
    """
    trt = types.ModuleType('tensorrt')
    trt.__version__ = version
    trt.calls = []  # (what, details) in call order
    trt.built = []  # one dict per build_serialized_network call
    trt.calibration_batches = []

    def record(what, **details):
        trt.calls.append((what, details))

    class Severity(enum.IntEnum):
        INTERNAL_ERROR = 0
        ERROR = 1
        WARNING = 2
        INFO = 3
        VERBOSE = 4

    class ILogger:
        def __init__(self):
            pass

    ILogger.Severity = Severity
    trt.ILogger = ILogger

    class IProgressMonitor:
        def __init__(self):
            pass

    trt.IProgressMonitor = IProgressMonitor

    if weak_typing:
        class IInt8EntropyCalibrator2:
            def __init__(self):
                pass

        trt.IInt8EntropyCalibrator2 = IInt8EntropyCalibrator2
        trt.BuilderFlag = enum.IntEnum('BuilderFlag', 'FP16 INT8 TF32')
    else:
        trt.BuilderFlag = enum.IntEnum('BuilderFlag', 'TF32 REFIT')
    trt.NetworkDefinitionCreationFlag = enum.IntEnum('NetworkDefinitionCreationFlag',
                                                     {'STRONGLY_TYPED': 1})
    trt.TensorIOMode = enum.IntEnum('TensorIOMode', 'NONE INPUT OUTPUT')
    trt.DataType = enum.IntEnum('DataType', 'FLOAT HALF INT8 INT32')

    def nptype(dtype):
        return {trt.DataType.FLOAT: np.float32, trt.DataType.HALF: np.float16}[dtype]

    trt.nptype = nptype

    class Tensor:
        def __init__(self, name, shape):
            self.name, self.shape = name, tuple(shape)

    class Network:
        def __init__(self, flags):
            self.flags = flags
            self.onnx = b''
            self.inputs: list[Tensor] = []

        @property
        def num_inputs(self):
            return len(self.inputs)

        def get_input(self, index):
            return self.inputs[index]

    class OnnxParser:
        def __init__(self, network, logger):
            self.network, self.errors = network, []

        def parse(self, data):
            record('parse', sha256=hashlib.sha256(data).hexdigest())
            try:
                session = _session(data)
            except Exception as exc:  # noqa: BLE001
                self.errors = [f'ModelImporter: {exc}'.splitlines()[0]]
                return False
            self.network.onnx = bytes(data)
            self.network.inputs = [
                Tensor(i.name, [d if isinstance(d, int) else -1 for d in i.shape])
                for i in session.get_inputs()]
            return True

        @property
        def num_errors(self):
            return len(self.errors)

        def get_error(self, index):
            return self.errors[index]

    class OptimizationProfile:
        def __init__(self):
            self.shapes = {}

        def set_shape(self, name, min, opt, max):  # noqa: A002 - TensorRT's names
            record('set_shape', name=name, min=tuple(min), opt=tuple(opt), max=tuple(max))
            self.shapes[name] = (tuple(min), tuple(opt), tuple(max))

    class BuilderConfig:
        def __init__(self):
            self.flags = set()
            self.profiles = []
            self.progress_monitor = None
            self.calibration_profile = None
            self._calibrator = None

        def set_flag(self, flag):
            record('set_flag', flag=flag.name)
            self.flags.add(flag.name)

        def add_optimization_profile(self, profile):
            self.profiles.append(profile)
            return len(self.profiles) - 1

        def set_calibration_profile(self, profile):
            if not weak_typing:
                raise AttributeError('set_calibration_profile was removed in TensorRT 11')
            self.calibration_profile = profile

        @property
        def int8_calibrator(self):
            return self._calibrator

        @int8_calibrator.setter
        def int8_calibrator(self, value):
            if not weak_typing:
                raise AttributeError('int8_calibrator was removed in TensorRT 11')
            record('int8_calibrator')
            self._calibrator = value

    class Builder:
        def __init__(self, logger):
            record('Builder')
            self.logger = logger

        def create_network(self, flags=0):
            record('create_network', flags=flags)
            return Network(flags)

        def create_builder_config(self):
            return BuilderConfig()

        def create_optimization_profile(self):
            return OptimizationProfile()

        def build_serialized_network(self, network, config):
            monitor = config.progress_monitor
            if monitor is not None:
                monitor.phase_start('Building engine', None, 2)
                monitor.phase_start('Tactic selection', 'Building engine', 3)
                for step in range(3):
                    assert monitor.step_complete('Tactic selection', step) is True
                monitor.phase_finish('Tactic selection')
                monitor.step_complete('Building engine', 0)
            name = network.inputs[0].name
            profile = config.profiles[0].shapes[name]
            if 'INT8' in config.flags:
                calibrator = config.int8_calibrator
                assert calibrator is not None, 'INT8 without a calibrator'
                assert calibrator.get_batch_size() == 1
                assert calibrator.read_calibration_cache() is None
                shape = profile[1]
                while True:
                    pointers = calibrator.get_batch([name])
                    if not pointers:
                        break
                    trt.calibration_batches.append(read_device(cudart, pointers[0], shape))
                calibrator.write_calibration_cache(b'fake calibration table')
            if monitor is not None:
                monitor.phase_finish('Building engine')
            gpu = cudart.state.gpus[cudart.state.device]
            header = {'tensorrt': version, 'gpu': gpu['name'], 'flags': sorted(config.flags),
                      'network_flags': network.flags, 'input': name,
                      'profile': [list(s) for s in profile],
                      'onnx_sha256': hashlib.sha256(network.onnx).hexdigest(),
                      'calibration_profile': config.calibration_profile is not None}
            trt.built.append(header)
            record('build_serialized_network', **header)
            return json.dumps(header).encode() + b'\n' + network.onnx

    class Engine:
        def __init__(self, header, onnx_bytes):
            self.header = header
            self.session = _session(onnx_bytes)
            self.input = header['input']
            self.outputs = [o.name for o in self.session.get_outputs()]
            lo, _, hi = header['profile']
            self.dynamic = lo != hi

        @property
        def num_io_tensors(self):
            return 1 + len(self.outputs)

        def get_tensor_name(self, index):
            return ([self.input] + self.outputs)[index]

        def get_tensor_mode(self, name):
            return trt.TensorIOMode.INPUT if name == self.input else trt.TensorIOMode.OUTPUT

        def get_tensor_dtype(self, name):
            return trt.DataType.FLOAT

        def get_tensor_shape(self, name):
            if name == self.input:
                shape = list(self.header['profile'][2])
                if self.dynamic:
                    shape[2] = shape[3] = -1
                return tuple(shape)
            return (-1,)

        def create_execution_context(self):
            record('create_execution_context')
            return Context(self)

    class Context:
        def __init__(self, engine):
            self.engine = engine
            self.shape = None
            self.addresses = {}
            self.output_shapes = {}

        def set_input_shape(self, name, shape):
            record('set_input_shape', name=name, shape=tuple(shape))
            lo, _, hi = self.engine.header['profile']
            if name != self.engine.input or len(shape) != 4 or any(
                    not a <= s <= b for a, s, b in zip(lo, shape, hi)):
                return False
            self.shape = tuple(shape)
            outputs = self.engine.session.run(None, {name: np.zeros(shape, np.float32)})
            self.output_shapes = {n: o.shape for n, o in zip(self.engine.outputs, outputs)}
            return True

        def get_tensor_shape(self, name):
            if name == self.engine.input:
                return self.shape
            return self.output_shapes[name]

        def set_tensor_address(self, name, pointer):
            record('set_tensor_address', name=name)
            self.addresses[name] = pointer
            return True

        def execute_async_v3(self, stream_handle):
            assert isinstance(stream_handle, int)
            assert stream_handle in cudart.state.streams, 'unknown stream'
            tensor = read_device(cudart, self.addresses[self.engine.input], self.shape)
            outputs = self.engine.session.run(None, {self.engine.input: tensor})
            for name, out in zip(self.engine.outputs, outputs):
                data = np.ascontiguousarray(out, np.float32).tobytes()
                block, offset = cudart.state.find(self.addresses[name], len(data))
                block[offset:offset + len(data)] = data
            return True

    class Runtime:
        def __init__(self, logger):
            self.logger = logger

        def deserialize_cuda_engine(self, data):
            data = bytes(data)
            record('deserialize_cuda_engine', sha256=hashlib.sha256(data).hexdigest())
            head, _, onnx_bytes = data.partition(b'\n')
            header = json.loads(head)
            gpu = cudart.state.gpus[cudart.state.device]['name']
            if header['tensorrt'] != version or header['gpu'] != gpu:
                self.logger.log(Severity.ERROR, 'engine built for another TensorRT or GPU')
                return None
            return Engine(header, onnx_bytes)

    trt.Builder, trt.OnnxParser, trt.Runtime = Builder, OnnxParser, Runtime
    return trt
