import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AssetService } from './assets.js';
import { ShareAssetParams, ShareParams, ShareQuery } from './schema.js';

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/** `filename*` (RFC 6266/5987) so any name survives, plus an ASCII fallback. */
function disposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `inline; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

/**
 * Public, unauthenticated share links of asset folders, outside /m2m/v1:
 *   GET /share/folders/{folderId}?v=&sig=                    the folder's ready assets in folder order (JSON, or HTML for browsers)
 *   GET /share/folders/{folderId}/assets/{sourceId}?v=&sig=  one asset's bytes
 * The signature covers the folder and its share token version; a deactivated folder, or one whose version
 * moved on, answers 404 like a folder that never existed.
 */
export function shareRoutes(assets: AssetService) {
  return async (instance: FastifyInstance): Promise<void> => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    const noStore = 'private, no-store';

    app.get('/share/folders/:folderId', {
      schema: { hide: true, params: ShareParams, querystring: ShareQuery },
    }, async (request, reply) => {
      const listing = await assets.shareListing(request.params.folderId, request.query.v, request.query.sig);
      reply.header('cache-control', noStore).header('x-content-type-options', 'nosniff');
      if (!String(request.headers.accept ?? '').includes('text/html')) return listing;
      const items = listing.assets
        .map((a) => `<li><a href="${escapeHtml(a.url)}">${escapeHtml(a.title)}</a> (${escapeHtml(a.filename)})${a.description ? ` — ${escapeHtml(a.description)}` : ''}</li>`)
        .join('');
      const description = listing.folder.description ? `<p>${escapeHtml(listing.folder.description)}</p>` : '';
      const html = `<!doctype html><meta charset="utf-8"><title>${escapeHtml(listing.folder.title)}</title><h1>${escapeHtml(listing.folder.title)}</h1>${description}<ul>${items}</ul>`;
      return reply.header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'").type('text/html; charset=utf-8').send(html);
    });

    app.get('/share/folders/:folderId/assets/:sourceId', {
      schema: { hide: true, params: ShareAssetParams, querystring: ShareQuery },
    }, async (request, reply) => {
      const { row, bytes } = await assets.sharedAsset(request.params.folderId, request.params.sourceId, request.query.v, request.query.sig);
      return reply
        .header('cache-control', noStore)
        .header('x-content-type-options', 'nosniff')
        .header('content-security-policy', "default-src 'none'; sandbox")
        .header('content-disposition', disposition(row.file_name ?? row.id))
        .type(row.detected_content_type ?? 'application/octet-stream')
        .send(bytes);
    });
  };
}
