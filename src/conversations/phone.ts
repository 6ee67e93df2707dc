import { parsePhoneNumberFromString } from 'libphonenumber-js';

/** E.164 form of an international phone number ("+52 1 55 1234 5678" → "+5215512345678"), or undefined. */
export function normalizePhone(raw: string): string | undefined {
  const parsed = parsePhoneNumberFromString(raw.trim());
  if (!parsed || !parsed.isValid()) return undefined;
  return parsed.number;
}
