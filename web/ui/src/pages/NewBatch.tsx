import { useEffect, useRef, useState, type DragEvent } from 'react';
import { Upload } from 'tus-js-client';
import { call, ConsoleError } from '../api.ts';

interface Catalog {
  stacks: Array<{ name: string; description: string }>;
  batches: boolean;
}

interface Item {
  key: string;
  file: File;
  name: string;
  sent: number;
  status: 'waiting' | 'uploading' | 'done' | 'failed';
  uploadId?: string;
  error?: string;
}

/** Files uploaded at once: enough to fill a connection, few enough to keep each one moving. */
const PARALLEL = 4;
const MAX_FILES = 10_000;
const IMAGE = /\.(jpe?g|png|webp|gif|avif|tiff?|heic|heif|bmp)$/i;
const fmt = new Intl.NumberFormat('en');

/** Every file under a dropped folder (the browser hands directories over as entries, page by page). */
async function filesOf(entry: FileSystemEntry): Promise<File[]> {
  if (entry.isFile) return [await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject))];
  if (!entry.isDirectory) return [];
  const reader = (entry as FileSystemDirectoryEntry).createReader();
  const out: File[] = [];
  for (;;) {
    const page = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
    if (page.length === 0) return out;
    for (const child of page) out.push(...(await filesOf(child)));
  }
}

const nameOf = (f: File) => (f.webkitRelativePath || f.name).slice(0, 500);

/**
 * A new batch from files: drop a folder or pick files, choose a stack, and each file uploads by
 * the tus protocol (resumable: a dropped connection carries on from the bytes the server has; a
 * reloaded page picks up the same files where they stopped), four at a time, each with its own
 * progress; then one call starts the batch over the finished uploads.
 */
export default function NewBatch({ workspaceId, onSubmitted }: { workspaceId: string; onSubmitted: () => void }) {
  const [catalog, setCatalog] = useState<Catalog | null>(null);
  const [stack, setStack] = useState('full-analysis');
  const [items, setItems] = useState<Item[]>([]);
  const [phase, setPhase] = useState<'choose' | 'uploading' | 'submitting'>('choose');
  const [dragging, setDragging] = useState(false);
  const [message, setMessage] = useState<{ kind: 'error' | 'ok'; text: string } | null>(null);
  const itemsRef = useRef<Item[]>([]);
  itemsRef.current = items;

  useEffect(() => {
    void call<Catalog>('GET', '/api/v1/catalog').then(setCatalog);
  }, []);

  const add = (files: File[]) => {
    setMessage(null);
    const images = files.filter((f) => f.type.startsWith('image/') || IMAGE.test(f.name));
    const skipped = files.length - images.length;
    const next = [...itemsRef.current, ...images.map((file, i) => ({ key: `${Date.now()}-${i}-${file.name}`, file, name: nameOf(file), sent: 0, status: 'waiting' as const }))];
    if (next.length > MAX_FILES) {
      setMessage({ kind: 'error', text: `A batch holds up to ${fmt.format(MAX_FILES)} photos; ${fmt.format(next.length)} were chosen. Split the folder.` });
      return;
    }
    setItems(next);
    if (skipped > 0) setMessage({ kind: 'error', text: `${fmt.format(skipped)} file(s) that are not photos were left out.` });
  };

  const onDrop = async (e: DragEvent) => {
    e.preventDefault();
    setDragging(false);
    const entries = [...e.dataTransfer.items].map((i) => i.webkitGetAsEntry()).filter((x): x is FileSystemEntry => x !== null);
    const files = entries.length ? (await Promise.all(entries.map(filesOf))).flat() : [...e.dataTransfer.files];
    add(files);
  };

  const update = (key: string, patch: Partial<Item>) => setItems((all) => all.map((it) => (it.key === key ? { ...it, ...patch } : it)));

  const uploadOne = (item: Item) =>
    new Promise<Item>((resolve) => {
      update(item.key, { status: 'uploading', sent: 0 });
      const upload = new Upload(item.file, {
        endpoint: '/api/v1/uploads',
        // Retried on a dropped connection, each time from the offset the server reports.
        retryDelays: [0, 1000, 3000, 5000, 10000, 20000],
        metadata: { workspace: workspaceId, filename: item.name, filetype: item.file.type },
        removeFingerprintOnSuccess: true,
        // Resumed only into the same workspace: the same file dropped into another starts afresh.
        fingerprint: async (file) => ['lenstack', workspaceId, nameOf(file as File), (file as File).type, (file as File).size, (file as File).lastModified].join('-'),
        onProgress: (sent) => update(item.key, { sent }),
        onSuccess: () => {
          const done = { status: 'done' as const, sent: item.file.size, uploadId: upload.url!.split('/').pop()! };
          update(item.key, done);
          resolve({ ...item, ...done });
        },
        onError: (err) => {
          const body = (err as { originalResponse?: { getBody(): string } }).originalResponse?.getBody();
          const failed = { status: 'failed' as const, error: body || err.message };
          update(item.key, failed);
          resolve({ ...item, ...failed });
        },
      });
      // The same file chosen again after a reload carries on where it stopped.
      void upload.findPreviousUploads().then((previous) => {
        if (previous[0]) upload.resumeFromPreviousUpload(previous[0]);
        upload.start();
      });
    });

  const uploadAll = async () => {
    setPhase('uploading');
    setMessage(null);
    // The outcome of each file is kept here, not read back from state (a render may still be pending).
    const now = [...itemsRef.current];
    const queue = now.map((it, i) => [it, i] as const).filter(([it]) => it.status !== 'done');
    await Promise.all(
      Array.from({ length: PARALLEL }, async () => {
        for (let next = queue.shift(); next; next = queue.shift()) now[next[1]] = await uploadOne(next[0]);
      }),
    );
    const failed = now.filter((it) => it.status === 'failed').length;
    if (failed > 0) {
      setPhase('choose');
      setMessage({ kind: 'error', text: `${fmt.format(failed)} file(s) did not upload. Upload them again, or start the batch without them.` });
      return;
    }
    await submit(now);
  };

  const submit = async (now: Item[]) => {
    const done = now.filter((it) => it.status === 'done' && it.uploadId);
    if (done.length === 0) return;
    setPhase('submitting');
    try {
      const batch = await call<{ id: string; counts: { total: number } }>('POST', `/api/v1/workspaces/${workspaceId}/batches`, {
        preset: stack,
        uploads: done.map((it) => ({ id: it.uploadId!, name: it.name })),
      });
      setItems([]);
      setMessage({ kind: 'ok', text: `Batch ${batch.id} started with ${fmt.format(batch.counts.total)} photos.` });
      onSubmitted();
    } catch (err) {
      setMessage({ kind: 'error', text: err instanceof ConsoleError ? err.message : 'The batch could not be started; try again.' });
    } finally {
      setPhase('choose');
    }
  };

  if (!catalog) return <p aria-busy="true">Loading…</p>;
  if (!catalog.batches) return <p className="hint">Batches cannot be started from this console server (it is not connected to the analysis pipeline).</p>;
  const total = items.reduce((n, it) => n + it.file.size, 0);
  const sent = items.reduce((n, it) => n + (it.status === 'done' ? it.file.size : it.sent), 0);
  const uploaded = items.filter((it) => it.status === 'done').length;
  const failed = items.filter((it) => it.status === 'failed').length;
  const busy = phase !== 'choose';
  return (
    <div className="new-batch">
      <div
        className={`dropzone${dragging ? ' over' : ''}`}
        onDragOver={(e) => {
          e.preventDefault();
          setDragging(true);
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={(e) => void onDrop(e)}
        data-testid="dropzone"
      >
        <p>Drop a folder or photos here, or</p>
        <p className="actions">
          <label className="button secondary">
            Choose photos
            <input type="file" multiple accept="image/*,.heic,.heif" className="visually-hidden" disabled={busy} onChange={(e) => add([...(e.target.files ?? [])])} />
          </label>
          <label className="button secondary">
            Choose a folder
            <input type="file" className="visually-hidden" disabled={busy} {...{ webkitdirectory: '' }} onChange={(e) => add([...(e.target.files ?? [])])} />
          </label>
        </p>
      </div>
      <div className="inline">
        <label htmlFor="batch-stack">Lenses</label>
        <select id="batch-stack" value={stack} disabled={busy} onChange={(e) => setStack(e.target.value)}>
          {catalog.stacks.map((s) => (
            <option key={s.name} value={s.name} title={s.description}>
              {s.name}
            </option>
          ))}
        </select>
        <button type="button" disabled={busy || items.length === 0} onClick={() => void uploadAll()}>
          {failed > 0 ? 'Upload the rest and start' : `Upload ${fmt.format(items.length)} and start the batch`}
        </button>
        {failed > 0 && uploaded > 0 && (
          <button type="button" className="secondary" disabled={busy} onClick={() => void submit(itemsRef.current)}>
            Start with the {fmt.format(uploaded)} uploaded
          </button>
        )}
        {items.length > 0 && !busy && (
          <button type="button" className="quiet" onClick={() => setItems([])}>
            Clear
          </button>
        )}
      </div>
      {items.length > 0 && (
        <>
          <p className="hint" aria-live="polite" data-testid="upload-summary">
            {fmt.format(uploaded)} of {fmt.format(items.length)} uploaded · {(sent / 1024 ** 2).toFixed(1)} of {(total / 1024 ** 2).toFixed(1)} MB
            {phase === 'submitting' && ' · starting the batch…'}
          </p>
          <progress max={Math.max(1, total)} value={sent} aria-label="All files uploaded">
            {Math.round((sent / Math.max(1, total)) * 100)}%
          </progress>
          <ol className="uploads" data-testid="uploads">
            {items.map((it) => (
              <li key={it.key}>
                <span className="name">{it.name}</span>
                <progress max={Math.max(1, it.file.size)} value={it.status === 'done' ? it.file.size : it.sent} aria-label={`${it.name} uploaded`} />
                <span className={`state ${it.status}`}>{it.status === 'failed' ? `failed: ${it.error ?? ''}` : it.status}</span>
              </li>
            ))}
          </ol>
        </>
      )}
      {message && (
        <p role={message.kind === 'error' ? 'alert' : 'status'} className={message.kind === 'error' ? 'error' : 'ok'}>
          {message.text}
        </p>
      )}
    </div>
  );
}
