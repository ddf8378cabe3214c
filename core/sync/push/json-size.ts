/**
 * How much larger than its text a json value gets once PostgreSQL renders it (jsonb's output, and
 * protocol 1's form of a json value, docs/protocol.md §4.2): numbers lose their exponent (`1e400`
 * is 401 characters, `1e131071` 131,072) and a space follows every `,` and `:`. A protocol 2
 * client sends the text itself, so a few bytes could become megabytes at commit (rendering,
 * hashing) or in a protocol 1 answer: the push counts that growth like request bytes, and refuses
 * a value no answer could carry.
 */

const NUMBER = /-?(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?/y;

/**
 * An upper bound of the characters PostgreSQL's rendering of the JSON text `text` adds to it (0
 * for text without exponents or separators). The text is valid JSON (checked before).
 */
export function jsonRenderingGrowth(text: string): number {
  let growth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // A string: skip to its closing quote (escapes skip the character they escape).
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x2c || c === 0x3a) {
      growth += 1;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(text);
      if (!m) continue;
      const exponent = m[3] ? Math.abs(Number(m[3])) : 0;
      // Every digit, the exponent's worth of zeros, a sign and a point.
      const rendered = (m[1]?.length ?? 0) + (m[2]?.length ?? 0) + exponent + 2;
      growth += Math.max(0, rendered - m[0].length);
      i += m[0].length - 1;
    }
  }
  return growth;
}
