/**
 * Random JSON values for property tests of canonical JSON (RFC 8785): strings that stress escaping
 * and key order, numbers on the edges of ES number formatting, nested arrays and objects. Each
 * suite brings its own characters and numbers; the nesting is the same everywhere.
 */
import fc from 'fast-check';

export function jsonValue(text: fc.Arbitrary<string>, number: fc.Arbitrary<number>, size: { arrays: number; keys: number }): fc.Arbitrary<unknown> {
  return fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.constant(null),
      fc.boolean(),
      number,
      text,
      fc.array(tie('value'), { maxLength: size.arrays }),
      fc.dictionary(text, tie('value'), { maxKeys: size.keys }),
    ),
  })).value;
}
