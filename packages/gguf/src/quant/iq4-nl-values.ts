/**
 * The 16 non-linear levels of iq4_nl and iq4_xs (ggml's `kvalues_iq4nl`): a 4-bit code indexes this
 * table and the level is multiplied by the block scale.
 */
export const IQ4_NL_VALUES: Int8Array = Int8Array.from([
  -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
]);
