import { fileTypeFromBuffer } from 'file-type';
import { baseType, isUtf8Text } from './extract.js';

const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
const XLSX = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';
const PPTX = 'application/vnd.openxmlformats-officedocument.presentationml.presentation';

export const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
export const DOCUMENT_TYPES = ['application/pdf', DOCX, XLSX, PPTX, 'text/plain', 'text/csv'] as const;
/** Text types cannot be sniffed; they are accepted when the bytes are UTF-8 text. */
const TEXT_TYPES = new Set<string>(['text/plain', 'text/csv']);
export const IMAGE_MAX_BYTES = 5 * 1024 * 1024;
export const DOCUMENT_MAX_BYTES = 10 * 1024 * 1024;

/** Executable formats (as file-type names them, and as clients declare them): never accepted. */
const EXECUTABLES = new Set([
  'application/x-msdownload', 'application/vnd.microsoft.portable-executable', 'application/x-dosexec', 'application/x-elf',
  'application/x-executable', 'application/x-sharedlib', 'application/x-mach-binary', 'application/java-vm', 'application/java-archive',
  'application/x-java-archive', 'application/wasm', 'application/x-msi', 'application/vnd.android.package-archive', 'application/x-android-dex',
  'application/x-deb', 'application/x-rpm', 'application/x-apple-diskimage', 'application/x-sh', 'application/x-shellscript',
  'application/x-bat', 'application/x-msdos-program',
]);

const NAMES: Record<string, string> = { 'image/jpg': 'image/jpeg', 'image/pjpeg': 'image/jpeg', 'application/x-pdf': 'application/pdf' };

export interface Assessment {
  status: 'ready' | 'unsupported' | 'blocked';
  findings: string[];
  detectedContentType: string | null;
  mediaType: 'image' | 'document' | null;
}

function megabytes(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

export function mediaTypeOf(contentType: string): 'image' | 'document' {
  return baseType(contentType).startsWith('image/') ? 'image' : 'document';
}

/**
 * Decides what an uploaded asset really is. The real type comes from the bytes (file-type's signatures);
 * the declared content type is never trusted: executables are blocked, a declared type the bytes
 * contradict is blocked, bytes nothing recognises are unsupported, and so are types and sizes outside
 * what may be sent to guests.
 */
export async function assessAsset(bytes: Buffer, declaredContentType: string): Promise<Assessment> {
  const declared = NAMES[baseType(declaredContentType)] ?? baseType(declaredContentType);
  const verdict = (status: Assessment['status'], finding: string, detected: string | null = null): Assessment => ({
    status,
    findings: [finding],
    detectedContentType: detected,
    mediaType: null,
  });
  if (bytes.length === 0) return verdict('unsupported', 'the file is empty');
  const sniffed = await fileTypeFromBuffer(bytes);
  const detected = sniffed ? (NAMES[sniffed.mime] ?? sniffed.mime) : null;
  if ((detected && EXECUTABLES.has(detected)) || bytes.subarray(0, 2).toString('latin1') === '#!') {
    return verdict('blocked', `the bytes are an executable or script (${detected ?? 'shebang script'}); executables are never accepted`, detected);
  }
  if (EXECUTABLES.has(declared)) return verdict('blocked', `declared ${declared}: executables are never accepted`, detected);
  let real: string;
  if (detected) {
    if (detected !== declared) {
      return verdict('blocked', `declared ${declared}, but the bytes are ${detected}; a content type that does not match the bytes is never trusted`, detected);
    }
    real = detected;
  } else if (isUtf8Text(bytes)) {
    if (!TEXT_TYPES.has(declared)) {
      const allowed = (IMAGE_TYPES as readonly string[]).includes(declared) || (DOCUMENT_TYPES as readonly string[]).includes(declared);
      if (allowed) return verdict('blocked', `declared ${declared}, but the bytes are text; a content type that does not match the bytes is never trusted`, 'text/plain');
      return verdict('unsupported', `${declared} is not a supported asset type`, 'text/plain');
    }
    real = declared;
  } else {
    return verdict('unsupported', `the bytes could not be identified as ${declared} or any supported type`);
  }
  const image = (IMAGE_TYPES as readonly string[]).includes(real);
  if (!image && !(DOCUMENT_TYPES as readonly string[]).includes(real)) {
    return verdict('unsupported', `${real} is not a supported asset type; images: PNG, JPEG, GIF, WebP; documents: PDF, DOCX, XLSX, PPTX, plain text, CSV`, real);
  }
  const limit = image ? IMAGE_MAX_BYTES : DOCUMENT_MAX_BYTES;
  if (bytes.length > limit) {
    return verdict('unsupported', `the ${image ? 'image' : 'document'} is ${megabytes(bytes.length)}; ${image ? 'images' : 'documents'} may be at most ${megabytes(limit)}`, real);
  }
  return { status: 'ready', findings: [], detectedContentType: real, mediaType: image ? 'image' : 'document' };
}
