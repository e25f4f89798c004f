{
  "variables": {
    "has_liburing%": "<!(test -f /usr/include/liburing.h && echo 1 || echo 0)"
  },
  "targets": [
    {
      "target_name": "pinned_memory",
      "sources": [
        "native/addon.cc",
        "native/cpu-features.cc",
        "native/pinned-alloc.cc",
        "native/parallel-copy.cc",
        "native/file-io.cc",
        "native/half-convert.cc",
        "native/quantize4.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++17", "-std=gnu++20"],
      # -ffp-contract=off: no fused multiply-add, so f32 results match the JS fallback bit for bit.
      # -Wno-maybe-uninitialized: GCC 12 flags its own _mm512_undefined_* helpers inside the AVX-512 intrinsics.
      "cflags_cc": ["-std=c++17", "-O3", "-fexceptions", "-ffp-contract=off", "-fno-fast-math", "-pthread", "-Wno-maybe-uninitialized"],
      "ldflags": ["-pthread"],
      "conditions": [
        ["has_liburing==1", {
          "defines": ["FLEXHELM_HAVE_LIBURING=1"],
          "libraries": ["-luring"]
        }]
      ]
    }
  ]
}
