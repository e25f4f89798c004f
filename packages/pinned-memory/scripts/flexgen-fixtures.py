#!/usr/bin/env python3
"""Writes src/fixtures/flexgen-compress.json: reference outputs of FlexLLMGen's own 4-bit compression.

Development tool, not run by the build or the tests. It imports FlexLLMGen from a checkout and loads each input the way
FlexLLMGen loads weights (TorchCompressedDevice.allocate + TorchTensor.load_from_np on the CPU), so the stored bytes
are exactly what FlexLLMGen keeps. Needs torch and numpy (Debian: apt-get install python3-torch).

    python3 scripts/flexgen-fixtures.py /path/to/FlexLLMGen > src/fixtures/flexgen-compress.json
"""
import base64
import json
import sys

import numpy as np
import torch

sys.path.insert(0, sys.argv[1])
from flexllmgen import pytorch_backend  # noqa: E402
from flexllmgen.compression import CompressionConfig  # noqa: E402

pytorch_backend.fix_recursive_import()
cpu = pytorch_backend.TorchDevice("cpu")
rng = np.random.default_rng(20261129)


def b64(array):
    return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode()


def reference_dequantize(packed, scale, shape, group_size, group_dim):
    """x = q / scale + mn in f32 (FlexLLMGen's CPU decompress: div_ then add_ on an f32 workspace)."""
    packed = torch.from_numpy(packed)
    scale = torch.from_numpy(scale)
    groups = scale.shape[group_dim]
    grouped = packed.view(shape[:group_dim] + (groups, group_size // 2) + shape[group_dim + 1:])
    codes = torch.empty(shape[:group_dim] + (groups, group_size) + shape[group_dim + 1:], dtype=torch.float32)
    even = [slice(None)] * (group_dim + 1) + [slice(0, None, 2)]
    odd = [slice(None)] * (group_dim + 1) + [slice(1, None, 2)]
    codes[tuple(even)] = grouped.bitwise_right_shift(4).float()
    codes[tuple(odd)] = grouped.bitwise_and(0xF).float()
    s, mn = scale.split(1, dim=group_dim + 1)
    values = codes.div_(s).add_(mn)
    flat = values.reshape(shape[:group_dim] + (groups * group_size,) + shape[group_dim + 1:])
    return flat.narrow(group_dim, 0, shape[group_dim]).contiguous().numpy()


def case(name, values, group_size, group_dim):
    config = CompressionConfig(num_bits=4, group_size=group_size, group_dim=group_dim, symmetric=False)
    tensor = cpu.compressed_device.allocate(values.shape, np.float16, config, pin_memory=False)  # no CUDA here
    tensor.load_from_np(values)
    packed = tensor.data[0].data.numpy()
    scale = tensor.data[1].data.numpy()
    assert scale.dtype == np.float16
    return {
        "name": name,
        "dtype": "f16" if values.dtype == np.float16 else "f32",
        "shape": list(values.shape),
        "groupSize": group_size,
        "groupDim": group_dim,
        "input": b64(values),
        "packedShape": list(packed.shape),
        "packed": b64(packed),
        "scaleShape": list(scale.shape),
        "scale": b64(scale),
        "dequantized": b64(reference_dequantize(packed, scale, values.shape, group_size, group_dim)),
    }


weights = (rng.standard_normal((200, 48)) * 0.05).astype(np.float16)
kv = rng.standard_normal((5, 6, 64)).astype(np.float16)
rows = (rng.standard_normal((7, 130)) * 3).astype(np.float16)
special = (rng.standard_normal((128, 4)) * 0.1).astype(np.float16)
special[0:64, 0] = 0.75  # constant group
special[64:128, 1] = rng.uniform(0, 1e-4, 64)  # 15 / range overflows f16: scale stored as Inf
special[0:64, 2] = rng.choice([0.0, -0.0, 6e-8, -6e-8, 60000.0, -60000.0], 64)  # signed zeros, subnormals, extremes
special[64:128, 3] = np.arange(64) / 4.2  # many values land on .5 before rounding
wide = rng.standard_normal((100, 3)).astype(np.float32) * 2

cases = [
    case("weights [200,48] grouped along rows (padded to 256)", weights, 64, 0),
    case("kv cache [5,6,64] grouped along head_dim", kv, 64, 2),
    case("rows [7,130] grouped along the last dim by 32 (padded)", rows, 32, 1),
    case("special values [128,4]", special, 64, 0),
    case("f32 input [100,3]", wide, 64, 0),
]
json.dump({"source": "FlexLLMGen compression.py via TorchCompressedDevice.load_from_np (CPU), torch " + torch.__version__,
           "cases": cases}, sys.stdout, indent=1)
sys.stdout.write("\n")
