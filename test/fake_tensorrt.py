"""A fake ``tensorrt`` module and a fake CUDA runtime, for tests on machines without either.

TensorRT and an NVIDIA GPU cannot exist on the machines these tests run on. The fakes follow
the TensorRT 10.x and 11.x Python API the runner uses and cuda-python's runtime calls, and
record every call. Device memory is real host memory behind fake addresses; copies to and
from it move real bytes (``ctypes`` on the host side), so a runner that copies the wrong
array, size or address gets wrong results. The fake "engine" runs the ONNX model it was built
from with ONNX Runtime on the CPU, so outputs are the model's real outputs.

Where the tests depend on it, the fakes behave as the real ones do:

- Class, method and enum names and enum values are the real bindings' (``make_fake_tensorrt``
  picks 10.x or 11.x by version); ``test_tensorrt.py`` checks every public name of the fake
  against the names the real bindings register (``test/data/tensorrt_api.json``).
- One logger per process: the first logger given to a Builder or Runtime receives every
  message (later ones are ignored, as TensorRT does); a message for a logger Python has
  freed fails the test (in TensorRT it would be a call through a dangling pointer).
- The builder config starts with TF32 set, as TensorRT's does.
- ``OnnxParser.parse(model, path=None)`` finds external weight files only beside ``path``.
- A network input is FLOAT or UINT8 as the ONNX's is; a UINT8 input may only feed ``Cast``
  nodes (TensorRT's rule: no other layer takes UINT8, not even a transpose), else the build
  fails. The engine reports the input's ``DataType`` and reads it from device memory as such
  (the calibrator's batches too).
- A build whose profile does not fit the network's fixed input dimensions fails, and an
  engine's ``get_tensor_shape`` is the network's dimensions (-1 where free), as TensorRT's.
- The current CUDA device is per thread; an engine runs only on the device it was loaded on.

Known differences, none of which the runner relies on: ``build_serialized_network`` returns
``bytes`` (TensorRT: ``IHostMemory``, which supports the buffer protocol the runner uses); the
engine format is the fake's own (a JSON header and the ONNX); engine outputs are float32
whatever the precision; the builder does no kernel timing, so the timing cache only counts
builds; ``cudaMemcpyAsync`` copies at once (CUDA queues it on the stream); the fake CUDA
runtime has no driver or context errors beyond the few coded below.

Installed only inside tests, through ``monkeypatch.setitem(sys.modules, ...)``.
"""

from __future__ import annotations

import ctypes
import enum
import hashlib
import json
import threading
import types
import weakref
from typing import Any

import numpy as np
import onnxruntime as ort

#: Attributes of the fake module that the real one does not have (the tests' records).
FAKE_ONLY = ('calls', 'built', 'calibration_batches', 'messages', 'loggers', 'state')


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
    """What the fake CUDA runtime holds: GPUs, each thread's current one, memory, streams."""

    def __init__(self, gpus: list[dict[str, Any]]) -> None:
        self.gpus = gpus
        self._current = threading.local()
        self.memory: dict[int, bytearray] = {}
        self.memory_device: dict[int, int] = {}
        self.pinned: dict[int, Any] = {}  # address -> ctypes buffer
        self.streams: dict[int, int] = {}  # handle -> device
        self.next_pointer = 0x7F0000000000
        self.calls: list[tuple] = []
        self.freed: list[int] = []
        self.copies: list[dict[str, Any]] = []  # one per cudaMemcpyAsync

    @property
    def device(self) -> int:
        """Return the calling thread's current GPU index: per thread in CUDA, 0 until set."""
        return getattr(self._current, 'device', 0)

    @device.setter
    def device(self, index: int) -> None:
        self._current.device = index

    def find(self, pointer: int, count: int) -> tuple[bytearray, int]:
        for base, block in self.memory.items():
            if base <= pointer and pointer + count <= base + len(block):
                return block, pointer - base
        raise AssertionError(f'no device allocation holds {count} bytes at {pointer:#x}')

    def is_pinned(self, pointer: int, count: int) -> bool:
        return any(base <= pointer and pointer + count <= base + ctypes.sizeof(buf)
                   for base, buf in self.pinned.items())


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
        state.memory_device[pointer] = state.device
        return (ok, pointer)

    def cudaFree(pointer):
        record('cudaFree', pointer)
        if pointer not in state.memory:
            return (CudaErr.cudaErrorInvalidValue,)
        del state.memory[pointer]
        del state.memory_device[pointer]
        state.freed.append(pointer)
        return (ok,)

    def cudaMallocHost(nbytes):
        record('cudaMallocHost', nbytes)
        buffer = ctypes.create_string_buffer(nbytes)
        pointer = ctypes.addressof(buffer)
        state.pinned[pointer] = buffer
        return (ok, pointer)

    def cudaFreeHost(pointer):
        record('cudaFreeHost', pointer)
        if state.pinned.pop(pointer, None) is None:
            return (CudaErr.cudaErrorInvalidValue,)
        return (ok,)

    def cudaStreamCreate():
        handle = 0x5000 + len(state.calls)
        state.streams[handle] = state.device
        record('cudaStreamCreate', handle)
        return (ok, FakeStream(handle))

    def cudaStreamDestroy(stream):
        record('cudaStreamDestroy', int(stream))
        state.streams.pop(int(stream), None)
        return (ok,)

    def cudaStreamSynchronize(stream):
        record('cudaStreamSynchronize', int(stream))
        return (ok,)

    def cudaDeviceSynchronize():
        return (ok,)

    def cudaMemcpyAsync(dst, src, count, kind, stream):
        record('cudaMemcpyAsync', kind, count)
        host = src if kind == MemcpyKind.cudaMemcpyHostToDevice else dst
        state.copies.append({'kind': kind.name, 'bytes': count,
                             'pinned': state.is_pinned(host, count), 'device': state.device})
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
                 cudaMemGetInfo, cudaMalloc, cudaFree, cudaMallocHost, cudaFreeHost,
                 cudaStreamCreate, cudaStreamDestroy, cudaStreamSynchronize,
                 cudaDeviceSynchronize, cudaMemcpyAsync, cudaGetErrorString):
        setattr(rt, func.__name__, func)
    return rt


def read_device(rt: types.ModuleType, pointer: int, shape, dtype=np.float32) -> np.ndarray:
    """Copy of the array stored in fake device memory at ``pointer``."""
    count = int(np.prod(shape)) * np.dtype(dtype).itemsize
    block, offset = rt.state.find(pointer, count)
    return np.frombuffer(bytes(block[offset:offset + count]), dtype=dtype).reshape(shape)


def _session(onnx_bytes: bytes) -> ort.InferenceSession:
    return ort.InferenceSession(onnx_bytes, providers=['CPUExecutionProvider'])


def _with_external_data(data: bytes, path: str | None) -> bytes:
    """Return the model with its external weights read in from beside ``path``.

    As TensorRT's parser does: without a path they are looked for in the working directory.
    """
    import os

    import onnx
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    model = onnx.ModelProto.FromString(data)
    if not any(uses_external_data(t) for t in model.graph.initializer):
        return data
    folder = os.path.dirname(path) if path else os.getcwd()
    load_external_data_for_model(model, folder)
    return model.SerializeToString()


def _build_problem(onnx_bytes: bytes, given: Any, profile: tuple) -> str | None:
    """Say what TensorRT would refuse to build of this network input and profile, else None."""
    import onnx

    dims = list(given.shape)
    for shape in profile:
        if len(shape) != len(dims) or any(d not in (-1, s) for d, s in zip(dims, shape)):
            return (f'profile shape {list(shape)} does not fit input {given.name} of '
                    f'dimensions {dims}')
    if given.dtype.name == 'UINT8':
        graph = onnx.ModelProto.FromString(onnx_bytes).graph
        users = [n.op_type for n in graph.node if given.name in n.input]
        if any(op != 'Cast' for op in users):
            return (f'UINT8 network input {given.name} feeds {users}: a UINT8 input may only '
                    'feed a cast layer')
    return None


# Enum values as the real bindings register them (test/data/tensorrt_api.json).
_ENUMS_10 = {
    'NetworkDefinitionCreationFlag': {'EXPLICIT_BATCH': 0, 'STRONGLY_TYPED': 1},
    'BuilderFlag': {'FP16': 0, 'INT8': 1, 'REFIT': 4, 'TF32': 6, 'BF16': 17},
}
_ENUMS_11 = {
    'NetworkDefinitionCreationFlag': {'STRONGLY_TYPED': 0},
    'BuilderFlag': {'REFIT': 4, 'TF32': 6},
}
_ENUMS_COMMON = {
    'MemoryPoolType': {'WORKSPACE': 0},
    'TensorIOMode': {'NONE': 0, 'INPUT': 1, 'OUTPUT': 2},
    'DataType': {'FLOAT': 0, 'HALF': 1, 'INT8': 2, 'INT32': 3, 'UINT8': 5},
}


def make_fake_tensorrt(cudart: types.ModuleType, version: str = '10.13.0.35'
                       ) -> types.ModuleType:
    """Return a fake ``tensorrt`` module bound to the fake CUDA runtime ``cudart``.

    A version from 11 on imitates TensorRT 11: no FP16/INT8 builder flags and no int8
    calibrators (strongly typed networks only), and its enum values.
    """
    major = int(version.split('.')[0])
    weak_typing = major < 11
    trt = types.ModuleType('tensorrt')
    trt.__version__ = version
    trt.calls = []  # (what, details) in call order
    trt.built = []  # one dict per build_serialized_network call
    trt.calibration_batches = []
    trt.messages = []  # (severity, message) TensorRT sent to its logger
    trt.loggers = []  # every distinct logger a Builder or Runtime was given
    process_logger: list[Any] = []  # a weak reference to the first one: TensorRT keeps it

    def record(what, **details):
        trt.calls.append((what, details))

    for name, members in {**(_ENUMS_10 if weak_typing else _ENUMS_11),
                          **_ENUMS_COMMON}.items():
        setattr(trt, name, enum.IntEnum(name, members))

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

    def register_logger(logger):
        if not any(known is logger for known in trt.loggers):
            trt.loggers.append(logger)
        if not process_logger:
            process_logger.append(weakref.ref(logger))

    def emit(severity, message):
        """Send a message to the process's logger, as TensorRT does from C++."""
        trt.messages.append((severity, message))
        if not process_logger:
            return
        logger = process_logger[0]()
        assert logger is not None, ('TensorRT would call a logger that Python has freed '
                                    '(a crash): keep the process logger alive')
        logger.log(severity, message)

    class IProgressMonitor:
        def __init__(self):
            pass

    trt.IProgressMonitor = IProgressMonitor

    if weak_typing:
        class IInt8EntropyCalibrator2:
            def __init__(self):
                pass

        trt.IInt8EntropyCalibrator2 = IInt8EntropyCalibrator2

    def nptype(dtype):
        return {trt.DataType.FLOAT: np.float32, trt.DataType.HALF: np.float16,
                trt.DataType.UINT8: np.uint8}[dtype]

    onnx_types = {'tensor(float)': 'FLOAT', 'tensor(float16)': 'HALF', 'tensor(uint8)': 'UINT8'}

    trt.nptype = nptype

    class ITensor:
        def __init__(self, name, shape, dtype=None):
            self.name, self.shape = name, tuple(shape)
            self.dtype = trt.DataType.FLOAT if dtype is None else dtype

    class INetworkDefinition:
        def __init__(self, flags):
            self._flags = flags
            self._onnx = b''
            self._inputs: list[ITensor] = []

        @property
        def flags(self):
            return self._flags

        @property
        def num_inputs(self):
            return len(self._inputs)

        def get_input(self, index):
            return self._inputs[index]

    class OnnxParser:
        def __init__(self, network, logger):
            self._network, self._errors = network, []

        def parse(self, model, path=None):
            data = bytes(model)
            record('parse', sha256=hashlib.sha256(data).hexdigest(), path=path)
            try:
                data = _with_external_data(data, path)
                session = _session(data)
            except Exception as exc:  # noqa: BLE001
                self._errors = [f'ModelImporter: {exc}'.splitlines()[0]]
                return False
            self._network._onnx = data
            self._network._inputs = [
                ITensor(i.name, [d if isinstance(d, int) else -1 for d in i.shape],
                        getattr(trt.DataType, onnx_types[i.type]))
                for i in session.get_inputs()]
            return True

        def parse_from_file(self, model):
            with open(model, 'rb') as fh:
                return self.parse(fh.read(), model)

        @property
        def num_errors(self):
            return len(self._errors)

        def get_error(self, index):
            return self._errors[index]

    class IOptimizationProfile:
        def __init__(self):
            self._shapes = {}

        def set_shape(self, input, min, opt, max):  # noqa: A002 - TensorRT's names
            record('set_shape', name=input, min=tuple(min), opt=tuple(opt), max=tuple(max))
            self._shapes[input] = (tuple(min), tuple(opt), tuple(max))

    class ITimingCache:
        def __init__(self, header, builds):
            self._header, self._builds = header, builds

        def serialize(self):
            return json.dumps({**self._header, 'builds': self._builds}).encode()

    def timing_header():
        gpu = cudart.state.gpus[cudart.state.device]
        return {'tensorrt': version, 'gpu': gpu['name'], 'cc': list(gpu['cc'])}

    class IBuilderConfig:
        def __init__(self):
            self._flags = {'TF32'}  # TensorRT's default
            self._profiles = []
            self._pools = {}
            self._timing = None
            self.progress_monitor = None
            self._calibration_profile = None
            self._calibrator = None

        @property
        def flags(self):
            return sum(1 << int(getattr(trt.BuilderFlag, f)) for f in self._flags)

        def set_flag(self, flag):
            record('set_flag', flag=flag.name)
            self._flags.add(flag.name)

        def clear_flag(self, flag):
            record('clear_flag', flag=flag.name)
            self._flags.discard(flag.name)

        def get_flag(self, flag):
            return flag.name in self._flags

        def set_memory_pool_limit(self, pool, pool_size):
            record('set_memory_pool_limit', pool=pool.name, size=int(pool_size))
            self._pools[pool.name] = int(pool_size)

        def get_memory_pool_limit(self, pool):
            return self._pools.get(pool.name, cudart.state.gpus[cudart.state.device]['memory'])

        def create_timing_cache(self, serialized_timing_cache):
            data = bytes(serialized_timing_cache)
            record('create_timing_cache', size=len(data))
            if not data:
                return ITimingCache(timing_header(), 0)
            try:
                saved = json.loads(data)
                builds = int(saved.pop('builds'))
            except (ValueError, KeyError, TypeError):
                emit(Severity.ERROR, 'timing cache: invalid serialized data')
                return None
            return ITimingCache(saved, builds)

        def set_timing_cache(self, cache, ignore_mismatch):
            fits = cache._header == timing_header()
            record('set_timing_cache', fits=fits, builds=cache._builds)
            if not fits and not ignore_mismatch:
                emit(Severity.WARNING, 'timing cache was created for another device or '
                                       'TensorRT version')
                return False
            self._timing = cache
            return True

        def get_timing_cache(self):
            return self._timing

        def add_optimization_profile(self, profile):
            self._profiles.append(profile)
            return len(self._profiles) - 1

        def set_calibration_profile(self, profile):
            self._calibration_profile = profile

        @property
        def int8_calibrator(self):
            return self._calibrator

        @int8_calibrator.setter
        def int8_calibrator(self, value):
            record('int8_calibrator')
            self._calibrator = value

    if not weak_typing:  # TensorRT 11 has neither
        del IBuilderConfig.int8_calibrator, IBuilderConfig.set_calibration_profile

    class Builder:
        def __init__(self, logger):
            record('Builder')
            register_logger(logger)

        def create_network(self, flags=0):
            record('create_network', flags=flags)
            return INetworkDefinition(flags)

        def create_builder_config(self):
            return IBuilderConfig()

        def create_optimization_profile(self):
            return IOptimizationProfile()

        def build_serialized_network(self, network, config):
            monitor = config.progress_monitor
            if monitor is not None:
                monitor.phase_start('Building engine', None, 2)
                monitor.phase_start('Tactic selection', 'Building engine', 3)
                for step in range(3):
                    assert monitor.step_complete('Tactic selection', step) is True
                monitor.phase_finish('Tactic selection')
                monitor.step_complete('Building engine', 0)
            given = network._inputs[0]
            name = given.name
            profile = config._profiles[0]._shapes[name]
            problem = _build_problem(network._onnx, given, profile)
            if problem:
                emit(Severity.ERROR, problem)
                return None
            emit(Severity.WARNING, f'fake build of {name}: no kernels are timed')
            emit(Severity.INFO, 'fake build: informational message')
            if 'INT8' in config._flags:
                calibrator = config._calibrator
                assert calibrator is not None, 'INT8 without a calibrator'
                assert calibrator.get_batch_size() == 1
                assert calibrator.read_calibration_cache() is None
                chosen = config._calibration_profile
                shape = chosen._shapes[name][1] if chosen is not None else profile[1]
                while True:
                    pointers = calibrator.get_batch([name])
                    if not pointers:
                        break
                    trt.calibration_batches.append(
                        read_device(cudart, pointers[0], shape, nptype(given.dtype)))
                calibrator.write_calibration_cache(b'fake calibration table')
            if monitor is not None:
                monitor.phase_finish('Building engine')
            timing = config._timing
            gpu = cudart.state.gpus[cudart.state.device]
            header = {'tensorrt': version, 'gpu': gpu['name'], 'flags': sorted(config._flags),
                      'network_flags': network._flags, 'input': name,
                      'input_dims': list(given.shape), 'input_dtype': given.dtype.name,
                      'profile': [list(s) for s in profile],
                      'workspace': config._pools.get('WORKSPACE'),
                      'timing_cache_builds': timing._builds if timing else None,
                      'onnx_sha256': hashlib.sha256(network._onnx).hexdigest(),
                      'calibration_profile': config._calibration_profile is not None}
            if timing is not None:
                timing._builds += 1
            trt.built.append(header)
            record('build_serialized_network', **header)
            return json.dumps(header).encode() + b'\n' + network._onnx

    class ICudaEngine:
        def __init__(self, header, onnx_bytes):
            self._header = header
            self._session = _session(onnx_bytes)
            self._input = header['input']
            self._outputs = [o.name for o in self._session.get_outputs()]
            self._device = cudart.state.device
            self._dtype = getattr(trt.DataType, header['input_dtype'])

        @property
        def num_io_tensors(self):
            return 1 + len(self._outputs)

        def get_tensor_name(self, index):
            return ([self._input] + self._outputs)[index]

        def get_tensor_mode(self, name):
            return trt.TensorIOMode.INPUT if name == self._input else trt.TensorIOMode.OUTPUT

        def get_tensor_dtype(self, name):
            return self._dtype if name == self._input else trt.DataType.FLOAT

        def get_tensor_shape(self, name):
            if name == self._input:
                return tuple(self._header['input_dims'])
            return (-1,)

        def get_tensor_profile_shape(self, name, profile_index):
            assert name == self._input and profile_index == 0
            return [tuple(s) for s in self._header['profile']]

        def create_execution_context(self):
            record('create_execution_context')
            return IExecutionContext(self)

    class IExecutionContext:
        def __init__(self, engine):
            self._engine = engine
            self._shape = None
            self._addresses = {}
            self._output_shapes = {}

        def set_input_shape(self, name, shape):
            record('set_input_shape', name=name, shape=tuple(shape))
            lo, _, hi = self._engine._header['profile']
            if name != self._engine._input or len(shape) != 4 or any(
                    not a <= s <= b for a, s, b in zip(lo, shape, hi)):
                return False
            self._shape = tuple(shape)
            blank = np.zeros(shape, nptype(self._engine._dtype))
            outputs = self._engine._session.run(None, {name: blank})
            self._output_shapes = {n: o.shape for n, o in zip(self._engine._outputs, outputs)}
            return True

        def get_tensor_shape(self, name):
            if name == self._engine._input:
                return self._shape
            return self._output_shapes[name]

        def set_tensor_address(self, name, memory):
            record('set_tensor_address', name=name)
            self._addresses[name] = memory
            return True

        def execute_async_v3(self, stream_handle):
            assert isinstance(stream_handle, int)
            state = cudart.state
            assert stream_handle in state.streams, 'unknown stream'
            if state.device != self._engine._device or \
                    state.streams[stream_handle] != self._engine._device:
                emit(Severity.ERROR, f'engine of device {self._engine._device} enqueued '
                                     f'on device {state.device}')
                return False
            tensor = read_device(cudart, self._addresses[self._engine._input], self._shape,
                                 nptype(self._engine._dtype))
            outputs = self._engine._session.run(None, {self._engine._input: tensor})
            for name, out in zip(self._engine._outputs, outputs):
                data = np.ascontiguousarray(out, np.float32).tobytes()
                block, offset = state.find(self._addresses[name], len(data))
                block[offset:offset + len(data)] = data
            return True

    class Runtime:
        def __init__(self, logger):
            register_logger(logger)

        def deserialize_cuda_engine(self, serialized_engine):
            data = bytes(serialized_engine)
            record('deserialize_cuda_engine', sha256=hashlib.sha256(data).hexdigest())
            head, _, onnx_bytes = data.partition(b'\n')
            header = json.loads(head)
            gpu = cudart.state.gpus[cudart.state.device]['name']
            if header['tensorrt'] != version or header['gpu'] != gpu:
                emit(Severity.ERROR, 'engine built for another TensorRT or GPU')
                return None
            return ICudaEngine(header, onnx_bytes)

    for cls in (Builder, OnnxParser, Runtime, ITensor, INetworkDefinition, IBuilderConfig,
                IOptimizationProfile, ITimingCache, ICudaEngine, IExecutionContext):
        setattr(trt, cls.__name__, cls)
    return trt
