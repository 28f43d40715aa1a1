// Python's repr() of the values an item holds once deserialised (boto3's TypeDeserializer:
// S -> str, N -> Decimal, BOOL -> bool, NULL -> None, L -> list, M -> dict, SS/NS -> set), so
// that a refusal here reads exactly like the Python library's for the same item.
import type { AttributeValue } from '@aws-sdk/client-dynamodb';

// Characters str.isprintable() rejects (other than the ASCII space): Python escapes them.
const NON_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;

export function reprStr(value: string): string {
  const quote = value.includes("'") && !value.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of value) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === '\\') out += '\\\\';
    else if (ch === quote) out += `\\${quote}`;
    else if (ch === '\t') out += '\\t';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch !== ' ' && (code < 0x20 || code === 0x7f || NON_PRINTABLE.test(ch))) {
      out += escape(code);
    } else out += ch;
  }
  return out + quote;
}

function escape(code: number): string {
  if (code < 0x100) return `\\x${code.toString(16).padStart(2, '0')}`;
  if (code < 0x10000) return `\\u${code.toString(16).padStart(4, '0')}`;
  return `\\U${code.toString(16).padStart(8, '0')}`;
}

/** repr() of an attribute as boto3 deserialises it; `undefined` (absent) is None. */
export function reprAttribute(value: AttributeValue | undefined): string {
  if (value === undefined || value.NULL !== undefined) return 'None';
  if (value.S !== undefined) return reprStr(value.S);
  if (value.N !== undefined) return `Decimal(${reprStr(value.N)})`;
  if (value.BOOL !== undefined) return value.BOOL ? 'True' : 'False';
  if (value.L !== undefined) return `[${value.L.map(reprAttribute).join(', ')}]`;
  if (value.M !== undefined) {
    const entries = Object.entries(value.M).map(([k, v]) => `${reprStr(k)}: ${reprAttribute(v)}`);
    return `{${entries.join(', ')}}`;
  }
  if (value.SS !== undefined) return `{${value.SS.map(reprStr).join(', ')}}`;
  if (value.NS !== undefined) return `{${value.NS.map((n) => `Decimal(${reprStr(n)})`).join(', ')}}`;
  if (value.B !== undefined) return `Binary(b'...')`;
  return 'None';
}
