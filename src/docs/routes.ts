import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';

/** Swagger UI's files, served from the installed package (no CDN: the page works offline). */
const ASSETS = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'init.js': 'text/javascript; charset=utf-8',
} as const;
type Asset = keyof typeof ASSETS;

function isAsset(name: string): name is Asset {
  return Object.hasOwn(ASSETS, name);
}

const page = (prefix: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>M2M API reference</title>
<link rel="stylesheet" href="${prefix}/docs/assets/swagger-ui.css">
</head>
<body>
<div id="reference"></div>
<script src="${prefix}/docs/assets/swagger-ui-bundle.js"></script>
<script src="${prefix}/docs/assets/swagger-ui-standalone-preset.js"></script>
<script src="${prefix}/docs/assets/init.js"></script>
</body>
</html>
`;

// validatorUrl null: Swagger UI would otherwise send the document to validator.swagger.io.
const init = (prefix: string) => `window.ui = SwaggerUIBundle({
  url: '${prefix}/openapi.json',
  dom_id: '#reference',
  deepLinking: true,
  validatorUrl: null,
  displayOperationId: true,
  defaultModelsExpandDepth: 0,
  presets: [SwaggerUIBundle.presets.apis],
});
`;

/** The API reference at GET {prefix}/docs: Swagger UI rendering {prefix}/openapi.json, every asset served here. */
export function docsRoutes(prefix: string) {
  const dist = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  const cache = new Map<Asset, Buffer>();
  const load = async (name: Asset): Promise<Buffer> => {
    const cached = cache.get(name);
    if (cached) return cached;
    const bytes = name === 'init.js' ? Buffer.from(init(prefix)) : await readFile(path.join(dist, name));
    cache.set(name, bytes);
    return bytes;
  };
  return async (app: FastifyInstance): Promise<void> => {
    app.get(`${prefix}/docs`, { schema: { hide: true } }, async (_request, reply) =>
      reply.type('text/html; charset=utf-8').header('content-security-policy', "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'").send(page(prefix)),
    );
    app.get<{ Params: { name: string } }>(`${prefix}/docs/assets/:name`, { schema: { hide: true } }, async (request, reply) => {
      const { name } = request.params;
      if (!isAsset(name)) return reply.callNotFound();
      return reply.type(ASSETS[name]).header('cache-control', 'public, max-age=3600').send(await load(name));
    });
  };
}
