// Functions the addon exports to JS. Argument types are validated by the TypeScript wrapper (src/native-backend.ts);
// these only re-check what memory safety depends on.
#pragma once

#include <napi.h>

namespace flexhelm {

Napi::Value AllocPinned(const Napi::CallbackInfo& info);
Napi::Value Copy(const Napi::CallbackInfo& info);
Napi::Value ReadFile(const Napi::CallbackInfo& info);
Napi::Value WriteFile(const Napi::CallbackInfo& info);
Napi::Value F16ToF32(const Napi::CallbackInfo& info);
Napi::Value Bf16ToF32(const Napi::CallbackInfo& info);
Napi::Value F32ToF16(const Napi::CallbackInfo& info);
Napi::Value Quantize4(const Napi::CallbackInfo& info);
Napi::Value Dequantize4(const Napi::CallbackInfo& info);
bool ioUringCompiledIn();

}  // namespace flexhelm
