import { SerializerSelector, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';

/**
 * Fastify's own response serializers (fast-json-stringify, with the shared schemas), each built on the first
 * response of its route and status instead of at start: building every route's serializers was about 0.4 s of
 * the server's start, most of the time to ready on PostgreSQL.
 */
export function lazySerializers(): SerializerFactory {
  const build = SerializerSelector();
  return (externalSchemas, options) => {
    const compile = build(externalSchemas, options);
    return (route) => {
      let serialize: ((doc: unknown) => string) | undefined;
      return (doc: unknown) => {
        serialize ??= compile(route);
        return serialize(doc);
      };
    };
  };
}
