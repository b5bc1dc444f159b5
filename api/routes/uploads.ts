import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { validationFailed } from '../../core/errors.ts';
import { UPLOADS_ROUTE } from '../../uploads/service.ts';
import type { AppDeps } from '../deps.ts';
import { principalOf } from '../plugins/auth.ts';
import { errorResponses } from '../schemas/common.ts';

/**
 * Marks an operation of the tus protocol: spoken by a tus client (tus-js-client, tus-py-client …),
 * not by the generated JSON client, so its successes carry headers, not a body.
 */
export const TUS = 'x-tus-protocol';
const tusHeaders = 'Every request carries `Tus-Resumable: 1.0.0`.';
const id = z.object({ id: z.string().describe('The upload id (`upl_…`), the last segment of the Location answered at creation') });
const noBody = z.null().describe('No body');

/**
 * Resumable uploads (tus 1.0) for Bearer keys: one upload per photo, then its id in any request
 * that takes a photo. The protocol itself is uploads/tus.ts (shared with the console).
 */
export function uploadRoutes(deps: AppDeps): FastifyPluginAsync {
  return async (app) => {
    deps.uploads!.register(
      app,
      (request) => {
        const principal = principalOf(request);
        if (!principal.accountId) throw validationFailed('Authorization: uploads belong to an account; the anonymous sandbox key has none');
        return principal.accountId;
      },
      {
        POST: {
          operationId: 'createUpload',
          summary: 'Start a resumable photo upload (tus 1.0)',
          description: `${tusHeaders} Creates an upload of \`Upload-Length\` bytes (at most the image size limit) and answers 201 with its \`Location\` (\`${UPLOADS_ROUTE}/{id}\`); send the bytes with PATCH (or in this POST, tus creation-with-upload), resume after a drop with HEAD then PATCH, from any API process. \`Upload-Metadata: uploadId\` (\`upl_\` and 32 hex digits) names the upload yourself: you know its URL before this answer arrives, so a POST cut off mid-body resumes from HEAD (400 \`VALIDATION_FAILED\` when the id is taken or not of that shape: it is never replaced by another). The finished upload's id goes wherever a photo does: \`images: [{ "uploadId": "upl_…" }]\` on analyze, \`uploadIds\` on lookup, \`uploadId\` on enrich, \`items: [{ "uploadId": … }]\` and \`vehicles[].items\` on batches. Uploads are not billed; they count against the account's upload quota (413 beyond it; 2 GiB by default until the account has bought credits) and expire when no billed request (analyze, batches, enrich; not lookup) used them for 24 h, and 7 days after creation in any case. Any tus client works (tus-js-client, tus-py-client, tusd's clients).`,
          tags: ['uploads'],
          [TUS]: true,
          security: [{ bearer: [] }],
          response: { 201: noBody, ...errorResponses(400, 401, 413, 429) },
        },
        HEAD: {
          operationId: 'getUploadOffset',
          summary: 'How many bytes of an upload arrived (tus HEAD)',
          description: `${tusHeaders} Answers \`Upload-Offset\` and \`Upload-Length\`; resume with PATCH from that offset. Another account's upload is 404; so is an expired one, saying it expired.`,
          tags: ['uploads'],
          [TUS]: true,
          security: [{ bearer: [] }],
          params: id,
          response: { 200: noBody, ...errorResponses(401, 404) },
        },
        PATCH: {
          operationId: 'appendUpload',
          summary: 'Send bytes of an upload (tus PATCH)',
          description: `${tusHeaders} Body: \`application/offset+octet-stream\` from \`Upload-Offset\` (which must be the offset the server holds, else 409). The PATCH that completes the upload hashes it (SHA-256) and reads its header (format, pixels) once; a file that is not an accepted image is refused (422) and deleted.`,
          tags: ['uploads'],
          [TUS]: true,
          security: [{ bearer: [] }],
          params: id,
          response: { 204: noBody, ...errorResponses(400, 401, 404, 409, 413, 422) },
        },
        DELETE: {
          operationId: 'deleteUpload',
          summary: 'Delete an upload (tus termination)',
          description: `${tusHeaders} Frees its share of the upload quota at once.`,
          tags: ['uploads'],
          [TUS]: true,
          security: [{ bearer: [] }],
          params: id,
          response: { 204: noBody, ...errorResponses(401, 404) },
        },
      },
    );
  };
}
