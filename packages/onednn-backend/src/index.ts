export { OneDnnBackend, type OneDnnBackendOptions, type DtypeDecision, type PackingStats } from './onednn-backend.js';
export { oneDnnStatus, requireBinding, hasFastIsa, addonPath, type ComputeDtype, type OneDnnStatus, type OneDnnFeatures, type NativeBinding, type NativeLinear, type NativeLayer, type LinearOptions, type QuantWeight, type QuantType, type NativeQuantLinear } from './native-addon.js';
export { logitError, passesGate, describeLogitError, ACCURACY_GATE, INT8_ACTIVATION_GATE, Q8K_ACTIVATION_GATE, quantizedTypeGate, type LogitError, type AccuracyGate } from './logit-error.js';
export { measureAccuracy, type AccuracyReport } from './measure-accuracy.js';
export { blockHeldKeys, quantizedParts, type QuantizedSource } from './quantized-parts.js';
export { createOptLayer, type OptLayerShape } from './opt-shaped-layer.js';
