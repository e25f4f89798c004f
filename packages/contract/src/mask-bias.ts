/** Bias used for masked attention scores (finite, so a row with every key masked stays a valid, uniform softmax). */
export const MASK_BIAS = -1e30;
