// The pure part of offload (policy, shapes, placement, memory plan): importing it loads no native addon, unlike the
// index, whose backend pulls in @flexhelm/pinned-memory. The cost model imports this.
export * from './policy.js';
export * from './model-shape.js';
export * from './placement.js';
export * from './memory-plan.js';
export * from './kv-capacity.js';
