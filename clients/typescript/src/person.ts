// The personId rules, the same rules and messages as the Python library
// (lambdas/saga_index/index/keys.py validate_person_id).
import { InvalidPersonIdError } from './errors.js';

/** DynamoDB caps a sort key at 1,024 bytes of UTF-8. */
export const MAX_SORT_KEY_BYTES = 1024;

/**
 * `personId` when it is a non-empty string of valid Unicode whose GSI4SK fits the 1,024-byte
 * sort-key limit; otherwise InvalidPersonIdError with the Python library's message
 * (lambdas/saga_index/index/keys.py validate_person_id). Without `openedAt` only
 * `personId + "#"` is checked.
 */
export function validatePersonId(personId: unknown, openedAt = ''): string {
  if (typeof personId !== 'string') {
    throw new InvalidPersonIdError(
      `personId must be a string, got ${typeName(personId)}: ${shown(personId)}`,
    );
  }
  if (personId.length === 0) throw new InvalidPersonIdError('personId must be a non-empty string');
  // A JavaScript string can hold a lone surrogate, which has no UTF-8 form: Node would hash
  // U+FFFD in its place and no other implementation could agree on the shard.
  let position = 0;
  for (const ch of personId) {
    const code = ch.codePointAt(0) ?? 0;
    if (code >= 0xd800 && code <= 0xdfff) {
      throw new InvalidPersonIdError(
        `personId is not valid Unicode text: 'utf-8' codec can't encode character ` +
          `'\\u${code.toString(16)}' in position ${position}: surrogates not allowed`,
      );
    }
    position += 1;
  }
  const size = Buffer.byteLength(personId, 'utf8') + 1 + Buffer.byteLength(openedAt, 'utf8');
  if (size > MAX_SORT_KEY_BYTES) {
    throw new InvalidPersonIdError(
      `personId is too long: its GSI4SK would be ${size} bytes of UTF-8, ` +
        `over DynamoDB's ${MAX_SORT_KEY_BYTES}-byte sort-key limit`,
    );
  }
  return personId;
}

// Python's type names for the values JSON and JavaScript share, so the message reads the same
// as the Python library's for the same input.
function typeName(value: unknown): string {
  if (value === null || value === undefined) return 'NoneType';
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float';
  if (typeof value === 'boolean') return 'bool';
  if (Array.isArray(value)) return 'list';
  if (typeof value === 'object') return 'dict';
  return typeof value;
}

export function shown(value: unknown): string {
  if (value === null || value === undefined) return 'None';
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** Text in single quotes, with what JSON escapes escaped: how a message shows a string. */
export function quoted(text: string): string {
  const body = JSON.stringify(text).slice(1, -1).replace(/\\"/g, '"').replace(/'/g, "\\'");
  return `'${body}'`;
}
