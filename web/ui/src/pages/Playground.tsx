import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type ClipboardEvent, type DragEvent } from 'react';
import { call, type SessionInfo } from '../api.ts';
import { ErrorNote } from '../ErrorNote.tsx';
import { useGet, ws } from '../query.ts';
import { NoWorkspace, useWorkspace, WorkspaceBar } from '../workspace.tsx';

interface CatalogLens {
  name: string;
  description: string;
  credits: number;
  fields: string[];
}
interface Catalog {
  lenses: CatalogLens[];
  stacks: Array<{ name: string; description: string; modules: string[] }>;
  run: boolean;
}
interface Preview {
  stack: string | null;
  lenses: string[];
  new: string[];
  inRegistry: string[];
  billed: string[];
  credits: number;
  warnings: string[];
}
interface Analysis {
  output: Record<string, unknown>;
  usage: { modulesUsed: string[]; creditsCharged?: number };
  warnings: string[];
  meta: { requestId: string; cacheHit?: boolean };
}
interface Photo {
  name: string;
  sha256: string;
  base64: string;
  url: string;
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** The photo's SHA-256 in the browser (WebCrypto) and its base64: the preview needs only the hash. */
async function readPhoto(file: File): Promise<Photo> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  const sha256 = Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  const base64 = btoa(binary);
  // A data: URL: the console's Content-Security-Policy allows data: images, not blob: ones.
  return { name: file.name || 'photo.jpg', sha256, base64, url: `data:${file.type || 'image/jpeg'};base64,${base64}` };
}

/** Single-quoted for a POSIX shell. */
const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The same request as curl, @lenstack/client and the CLI, the key left as a placeholder. */
export function snippets(file: string, choice: { preset?: string; modules?: string[] }) {
  const fields = choice.modules ? `"modules":${JSON.stringify(choice.modules)}` : `"preset":${JSON.stringify(choice.preset)}`;
  const curl = [
    `curl -sS --fail-with-body "\${LENSTACK_BASE_URL:-http://localhost:8080}/v1/analyze" \\`,
    `  -H "Authorization: Bearer $LENSTACK_API_KEY" -H 'Content-Type: application/json' \\`,
    `  --data-binary @- <<JSON`,
    `{"imageBase64":"$(base64 < ${shq(file)} | tr -d '\\n')",${fields}}`,
    `JSON`,
  ].join('\n');
  const ts = [
    `import { readFile } from 'node:fs/promises';`,
    `import { Lenstack } from '@lenstack/client';`,
    ``,
    `const lenstack = new Lenstack({ apiKey: process.env.LENSTACK_API_KEY, baseUrl: process.env.LENSTACK_BASE_URL ?? 'http://localhost:8080' });`,
    `const analysis = await lenstack.analyze({`,
    `  imageBase64: (await readFile(${JSON.stringify(file)})).toString('base64'),`,
    choice.modules ? `  modules: ${JSON.stringify(choice.modules)},` : `  preset: ${JSON.stringify(choice.preset)},`,
    `});`,
    `console.log(analysis.output, analysis.usage.creditsCharged);`,
  ].join('\n');
  const cli = `LENSTACK_API_KEY=svc_… npx lenstack analyze ${shq(file)} ${choice.modules ? `--lens ${choice.modules.join(',')}` : `--stack ${choice.preset}`} --json`;
  return { curl, ts, cli };
}

/** A field as a person reads it: scalars as they are, lists joined, objects as "key: value" pairs. */
function show(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return v.length ? v.map((x) => (typeof x === 'object' && x !== null ? `(${show(x)})` : show(x))).join('; ') : '—';
  if (typeof v === 'object') return Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== null && x !== undefined).map(([k, x]) => `${k}: ${typeof x === 'object' ? `{${show(x)}}` : show(x)}`).join(', ');
  return JSON.stringify(v);
}

/**
 * The Playground (/playground): a photo dropped, pasted or chosen; a stack or lenses from the
 * catalog with their prices; the cost before running, from the same delta plan that bills
 * (web/routes/playground.ts); a run with the sandbox (free fixtures) or live (billed); the answer for
 * people and as JSON; the same request as curl, TypeScript and CLI.
 */
export function Playground({ session }: { session: SessionInfo }) {
  const [workspace, choose] = useWorkspace(session);
  if (!workspace) return <NoWorkspace />;
  return (
    <>
      <WorkspaceBar session={session} workspace={workspace} onChoose={choose} section="Playground" />
      <Bench key={workspace.id} workspaceId={workspace.id} />
    </>
  );
}

function Bench({ workspaceId }: { workspaceId: string }) {
  const ids = useId();
  const base = `/api/v1/workspaces/${encodeURIComponent(workspaceId)}/playground`;
  const client = useQueryClient();
  const catalogRead = useGet<Catalog>(ws(workspaceId, 'playground', 'catalog'), `${base}/catalog`);
  const catalog = catalogRead.data;
  const [photo, setPhoto] = useState<Photo>();
  const [by, setBy] = useState<'stack' | 'lenses'>('stack');
  // The first stack of the catalog until the person picks another.
  const [stackPicked, setStack] = useState<string>();
  const stack = stackPicked ?? catalog?.stacks[0]?.name ?? '';
  const [picked, setPicked] = useState<string[]>([]);
  const [mode, setMode] = useState<'test' | 'live'>('test');
  const [answer, setAnswer] = useState<Analysis>();
  const [running, setRunning] = useState(false);
  const [failure, setFailure] = useState<string>();
  const setError = (e: unknown) => setFailure(e === undefined ? undefined : e instanceof Error ? e.message : 'Something went wrong; try again.');
  const [copied, setCopied] = useState('');

  const choice = by === 'stack' ? { preset: stack } : picked.length ? { modules: picked } : undefined;
  // The cost of this photo with this choice: a read (the POST carries the choice), cached per both.
  const previewKey = ws(workspaceId, 'playground', 'preview', photo?.sha256 ?? '', JSON.stringify(choice));
  const previewRead = useQuery({
    queryKey: previewKey,
    queryFn: () => call<Preview>('POST', `${base}/preview`, { sha256: photo!.sha256, ...choice }),
    enabled: photo !== undefined && choice !== undefined,
    staleTime: 0,
  });
  const preview = previewRead.data;
  const readError = catalogRead.error ?? previewRead.error;
  const error = failure ?? (readError ? (readError instanceof Error ? readError.message : 'Something went wrong; try again.') : undefined);

  const take = async (file: File | undefined | null) => {
    if (!file) return;
    setError(undefined);
    setAnswer(undefined);
    setPhoto(await readPhoto(file));
  };
  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    void take(e.dataTransfer.files[0]);
  };
  const onPaste = (e: ClipboardEvent) => {
    const file = Array.from(e.clipboardData.files).find((f) => f.type.startsWith('image/'));
    if (file) {
      e.preventDefault();
      void take(file);
    }
  };
  const run = async () => {
    if (!photo || !choice) return;
    setRunning(true);
    setError(undefined);
    try {
      setAnswer(await call<Analysis>('POST', `${base}/analyze`, { mode, imageBase64: photo.base64, ...choice }));
      // What is in the registry now changed: the cost is worked out again (shown as being worked out).
      void client.resetQueries({ queryKey: ws(workspaceId, 'playground', 'preview') });
    } catch (e) {
      setError(e);
    } finally {
      setRunning(false);
    }
  };
  const copy = async (what: string, text: string) => {
    await navigator.clipboard.writeText(text);
    setCopied(what);
  };

  if (!catalog) return error ? <ErrorNote text={error} /> : <p aria-busy="true">Loading…</p>;
  const lensByName = new Map(catalog.lenses.map((l) => [l.name, l]));
  const code = photo && choice ? snippets(photo.name, choice) : undefined;
  const registryCount = preview ? preview.inRegistry.filter((l) => lensByName.get(l)?.credits).length : 0;

  return (
    <div className="playground" onPaste={onPaste}>
      <section className="card" aria-labelledby={`${ids}-photo`}>
        <h2 id={`${ids}-photo`}>1. Photo</h2>
        <div className="drop" onDragOver={(e) => e.preventDefault()} onDrop={onDrop}>
          <label htmlFor={`${ids}-file`}>Choose, drop or paste a photo</label>
          <input id={`${ids}-file`} type="file" accept="image/*" onChange={(e) => void take(e.target.files?.[0])} />
          {photo && (
            <figure>
              <img src={photo.url} alt={`The chosen photo, ${photo.name}`} />
              <figcaption>
                {photo.name} · SHA-256 <code className="hash">{photo.sha256}</code>
              </figcaption>
            </figure>
          )}
        </div>
      </section>

      <section className="card" aria-labelledby={`${ids}-lenses`}>
        <h2 id={`${ids}-lenses`}>2. Lenses</h2>
        <fieldset>
          <legend>Choose by</legend>
          <label>
            <input type="radio" name={`${ids}-by`} checked={by === 'stack'} onChange={() => setBy('stack')} /> a stack
          </label>
          <label>
            <input type="radio" name={`${ids}-by`} checked={by === 'lenses'} onChange={() => setBy('lenses')} /> lenses
          </label>
        </fieldset>
        {by === 'stack' ? (
          <p>
            <label htmlFor={`${ids}-stack`}>Stack</label>{' '}
            <select id={`${ids}-stack`} value={stack} onChange={(e) => setStack(e.target.value)}>
              {catalog.stacks.map((s) => (
                <option key={s.name} value={s.name}>
                  {s.name} — {s.modules.reduce((n, m) => n + (lensByName.get(m)?.credits ?? 0), 0)} credits a photo
                </option>
              ))}
            </select>
          </p>
        ) : (
          <fieldset className="lens-picks">
            <legend>Lenses (moderation always runs, free)</legend>
            {catalog.lenses.filter((l) => l.name !== 'moderation').map((l) => (
              <label key={l.name}>
                <input
                  type="checkbox"
                  checked={picked.includes(l.name)}
                  onChange={(e) => setPicked(e.target.checked ? [...picked, l.name] : picked.filter((p) => p !== l.name))}
                />{' '}
                {l.name} <span className="muted">· {l.credits ? plural(l.credits, 'credit', 'credits') : 'free'}</span>
              </label>
            ))}
          </fieldset>
        )}
      </section>

      <section className="card" aria-labelledby={`${ids}-cost`}>
        <h2 id={`${ids}-cost`}>3. Cost and run</h2>
        <p role="status" className="preview">
          {!photo
            ? 'Choose a photo to see what it costs.'
            : !choice
              ? 'Pick at least one lens.'
              : !preview
                ? 'Working out the cost…'
                : `${plural(preview.billed.length, 'lens', 'lenses')} new, ${registryCount} already in your registry: ${plural(preview.credits, 'credit', 'credits')}`}
        </p>
        {preview && preview.inRegistry.length > 0 && <p className="muted">In your registry already (not billed again): {preview.inRegistry.join(', ')}</p>}
        <fieldset>
          <legend>Run with</legend>
          <label>
            <input type="radio" name={`${ids}-mode`} checked={mode === 'test'} onChange={() => setMode('test')} /> the sandbox (test key: fixture data, free)
          </label>
          <label>
            <input type="radio" name={`${ids}-mode`} checked={mode === 'live'} onChange={() => setMode('live')} /> live (billed as above)
          </label>
        </fieldset>
        <button type="button" onClick={() => void run()} disabled={!photo || !choice || running || !catalog.run} aria-busy={running}>
          {running ? 'Running…' : 'Run'}
        </button>
        {!catalog.run && <p className="muted">Running analyses is not available on this console.</p>}
        <ErrorNote text={error} />
      </section>

      {answer && (
        <section className="card" aria-labelledby={`${ids}-answer`}>
          <h2 id={`${ids}-answer`}>Answer</h2>
          <p role="status">
            {plural(answer.usage.creditsCharged ?? 0, 'credit', 'credits')} charged · request <code>{answer.meta.requestId}</code>
          </p>
          {answer.usage.modulesUsed.map((name) => {
            const fields = (lensByName.get(name)?.fields ?? []).filter((f) => f in answer.output);
            return (
              <div key={name} className="lens-answer">
                <h3>{name}</h3>
                {fields.length ? (
                  <dl>
                    {fields.map((f) => (
                      <div key={f}>
                        <dt>{f}</dt>
                        <dd>{show(answer.output[f])}</dd>
                      </div>
                    ))}
                  </dl>
                ) : (
                  <p className="muted">No fields.</p>
                )}
              </div>
            );
          })}
          <details>
            <summary>JSON</summary>
            <pre tabIndex={0} aria-label="The answer as JSON">{JSON.stringify(answer, null, 2)}</pre>
          </details>
        </section>
      )}

      {code && (
        <section className="card" aria-labelledby={`${ids}-copy`}>
          <h2 id={`${ids}-copy`}>The same request in code</h2>
          <p className="muted">Replace the key placeholder with one of your workspace's keys.</p>
          {([['curl', 'curl', code.curl], ['typescript', 'TypeScript (@lenstack/client)', code.ts], ['cli', 'CLI (lenstack analyze)', code.cli]] as const).map(([what, label, text]) => (
            <div key={what} className="snippet">
              <h3>{label}</h3>
              <pre tabIndex={0} aria-label={`${label} command`} data-snippet={what}>{text}</pre>
              <button type="button" onClick={() => void copy(what, text)}>
                Copy {label}
              </button>
            </div>
          ))}
          <p role="status" className="muted">{copied ? `Copied the ${copied} request.` : ''}</p>
        </section>
      )}
    </div>
  );
}
