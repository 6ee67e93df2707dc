/**
 * A result already written as JSON: `text` is exactly what the response schema's serializer would write for a
 * `T`, and is sent as it is. For bodies assembled from stored JSON (the event feed splices the stored event
 * bodies instead of parsing and serialising them again). `JSON.stringify` of it gives the same JSON.
 */
export class JsonText<T> {
  constructor(readonly text: string) {}

  value(): T {
    const parsed: T = JSON.parse(this.text);
    return parsed;
  }

  toJSON(): T {
    return this.value();
  }
}
