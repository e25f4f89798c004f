{
  "targets": [
    {
      "target_name": "onednn_backend",
      "sources": ["native/addon.cc", "native/kernels.cc", "native/logits-math.cc", "native/gemm/packed-linear.cc", "native/gemm/packed-gemv.cc", "native/gemm/compact-bf16.cc", "native/gemm/quant-gemv.cc", "native/gemm/kquant-gemv.cc", "native/gemm/kquant-gemm.cc", "native/gemm/kquant-interleave.cc", "native/gemm/quant-gemm.cc", "native/gemm/amx-gemm.cc", "native/attention/attention.cc", "native/attention/prefill.cc", "native/attention/decode.cc", "native/decoder-layer.cc", "native/norms.cc", "native/rope.cc", "native/activations.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_DISABLE_DEPRECATED", "NAPI_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17", "-std=gnu++20"],
      "cflags_cc": ["-std=c++17", "-O3", "-fexceptions", "-frtti", "-fopenmp", "-fno-fast-math", "-Wno-maybe-uninitialized", "-Wno-uninitialized"],
      "ldflags": ["-fopenmp"],
      "libraries": ["-ldnnl", "-fopenmp"]
    }
  ]
}
