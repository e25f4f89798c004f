/**
 * OPT's `model_type`, in its own file so OPT's config reader (`opt-config.ts`) and `optDescription` can name it without
 * importing the family entry that imports them.
 */
export const OPT_MODEL_TYPE = 'opt';
