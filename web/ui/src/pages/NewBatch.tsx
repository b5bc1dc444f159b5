import { useEffect, useRef, useState, type DragEvent } from 'react';
import { Link } from 'wouter';
import { Upload } from 'tus-js-client';
import { call, ConsoleError, newRequestId, postOnce } from '../api.ts';
import { DropZone } from '../DropZone.tsx';
import { fleetFiles, groupFleet, pathOf, readSheet, reviewFleet, type FleetFile, type SheetRow, type Vehicle } from '../fleet.ts';
import { fingerprints, forgetUploads, sweepUploads, uploadUrls } from '../upload-urls.ts';

interface Column {
  label: string;
  jsonPath: string;
  format?: string;
}

interface Catalog {
  stacks: Array<{ name: string; description: string; columns: Column[] }>;
  vehicles: { stack: string; maxPhotos: number; maxVehicles: number; columns: Column[] } | null;
  batches: boolean;
}

interface Item {
  key: string;
  file: File;
  name: string;
  /** Where its upload URL is kept across a reload (upload-urls.ts). */
  fingerprint: string;
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

/** Every file under a dropped folder, with its path (the browser hands directories over as entries, page by page). */
async function filesOf(entry: FileSystemEntry): Promise<FleetFile[]> {
  if (entry.isFile) {
    const file = await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject));
    return [{ file, path: pathOf(file, entry.fullPath) }];
  }
  if (!entry.isDirectory) return [];
  const reader = (entry as FileSystemDirectoryEntry).createReader();
  const out: FleetFile[] = [];
  for (;;) {
    const page = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
    if (page.length === 0) return out;
    for (const child of page) out.push(...(await filesOf(child)));
  }
}

/**
 * One request id per submission: the same body sent again (the person presses the button again
 * after an error, perhaps after changing and restoring a choice) goes under the same id, so the
 * server answers with the batch the first attempt made, if it made one; another body is a new
 * submission with a new id. The last few bodies are remembered, for this page's life.
 */
function useSubmissionId() {
  const ids = useRef(new Map<string, string>());
  return {
    idFor(body: unknown): string {
      const text = JSON.stringify(body);
      let id = ids.current.get(text);
      if (!id) {
        id = newRequestId();
        ids.current.set(text, id);
        // Bodies of up to 10,000 photos: a handful kept, the oldest dropped.
        while (ids.current.size > 4) ids.current.delete(ids.current.keys().next().value!);
      }
      return id;
    },
    done() {
      ids.current.clear();
    },
  };
}

/** The name a batch gives a file: its path in a chosen or dropped folder, or its name. */
const nameOf = (path: string) => path.slice(0, 500).replace(/[\r\n]+/g, ' ');
const mb = (n: number) => (n / 1024 ** 2).toFixed(1);

/**
 * Upload one file by the tus protocol into the workspace (resumable: a dropped connection carries
 * on from the bytes the server has). Its upload URL is kept under its fingerprint (upload-urls.ts)
 * until a batch takes it: the same file chosen again after a reload carries on where it stopped,
 * and one that had finished is found finished (HEAD) and not sent again (docs/decisions.md, "A
 * console fleet after a reload").
 */
function tusUpload(workspaceId: string, file: File, name: string, fingerprint: string, onProgress: (sent: number) => void): Promise<{ uploadId: string } | { error: string }> {
  return new Promise((resolve) => {
    const upload = new Upload(file, {
      endpoint: '/api/v1/uploads',
      // Retried on a dropped connection, each time from the offset the server reports.
      retryDelays: [0, 1000, 3000, 5000, 10000, 20000],
      metadata: { workspace: workspaceId, filename: name, filetype: file.type },
      urlStorage: uploadUrls,
      // Kept once finished too: forgotten when a batch takes the file (forgetUploads).
      removeFingerprintOnSuccess: false,
      // Resumed only into the same workspace: the same file dropped into another starts afresh.
      fingerprint: async () => fingerprint,
      onProgress: (sent) => onProgress(sent),
      onSuccess: () => resolve({ uploadId: upload.url!.split('/').pop()! }),
      onError: (err) => {
        const body = (err as { originalResponse?: { getBody(): string } }).originalResponse?.getBody();
        let message = err.message;
        try {
          message = (JSON.parse(body ?? '') as { error?: { message?: string } }).error?.message ?? message;
        } catch {
          if (body) message = body;
        }
        resolve({ error: message });
      },
    });
    // The same file chosen again after a reload carries on where it stopped.
    void upload.findPreviousUploads().then((previous) => {
      if (previous[0]) upload.resumeFromPreviousUpload(previous[0]);
      upload.start();
    });
  });
}

/** Run `work` over `items`, PARALLEL at a time, in order of the list. */
async function inParallel<T>(items: T[], work: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(Array.from({ length: PARALLEL }, async () => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) await work(next);
  }));
}

/** The export's columns: every column the lenses offer, each one chosen or not (all by default). */
function ColumnPicker({ columns, chosen, onChange, disabled }: { columns: Column[]; chosen: Set<string>; onChange: (next: Set<string>) => void; disabled: boolean }) {
  if (columns.length === 0) return null;
  return (
    <details className="columns">
      <summary>Export columns: {chosen.size === columns.length ? 'all' : `${chosen.size} of ${columns.length}`}</summary>
      <fieldset disabled={disabled}>
        <legend>The spreadsheet's columns after #, Source, Status, SHA-256 and Error</legend>
        {columns.map((c) => (
          <label key={c.jsonPath} className="check">
            <input
              type="checkbox"
              checked={chosen.has(c.jsonPath)}
              onChange={(e) => {
                const next = new Set(chosen);
                if (e.target.checked) next.add(c.jsonPath);
                else next.delete(c.jsonPath);
                onChange(next);
              }}
            />
            {c.label}
          </label>
        ))}
      </fieldset>
    </details>
  );
}

/** The body's `columns`: nothing when all are chosen (the defaults), else the chosen ones in order. */
const columnsBody = (columns: Column[], chosen: Set<string>) => (chosen.size === columns.length ? {} : { columns: columns.filter((c) => chosen.has(c.jsonPath)) });

/**
 * A new batch: photos (drop a folder or pick files, choose a stack) or vehicles (a folder of
 * folders, one per vehicle, and optionally a spreadsheet saying what each is). Each file uploads by
 * the tus protocol, four at a time, with progress; then one call starts the batch over the finished
 * uploads. Vehicles are reviewed before anything is uploaded or charged.
 */
export default function NewBatch({ workspaceId, onSubmitted }: { workspaceId: string; onSubmitted: () => void }) {
  const [catalog, setCatalog] = useState<Catalog | null>(null);
  const [kind, setKind] = useState<'photos' | 'vehicles'>('photos');
  useEffect(() => {
    void call<Catalog>('GET', '/api/v1/catalog').then(setCatalog);
    void sweepUploads();
  }, []);
  if (!catalog) return <p aria-busy="true">Loading…</p>;
  if (!catalog.batches) return <p className="hint">Batches cannot be started from this console server (it is not connected to the analysis pipeline).</p>;
  return (
    <div className="new-batch">
      <fieldset className="kind">
        <legend>What the batch holds</legend>
        <label className="check">
          <input type="radio" name="batch-kind" checked={kind === 'photos'} onChange={() => setKind('photos')} /> Photos
        </label>
        {catalog.vehicles && (
          <label className="check">
            <input type="radio" name="batch-kind" checked={kind === 'vehicles'} onChange={() => setKind('vehicles')} /> Vehicles (a folder per vehicle)
          </label>
        )}
      </fieldset>
      {kind === 'photos' || !catalog.vehicles ? (
        <PhotoBatch workspaceId={workspaceId} catalog={catalog} onSubmitted={onSubmitted} />
      ) : (
        <VehicleBatch workspaceId={workspaceId} offer={catalog.vehicles} onSubmitted={onSubmitted} />
      )}
    </div>
  );
}

function PhotoBatch({ workspaceId, catalog, onSubmitted }: { workspaceId: string; catalog: Catalog; onSubmitted: () => void }) {
  const [stack, setStack] = useState('full-analysis');
  const [items, setItems] = useState<Item[]>([]);
  const [phase, setPhase] = useState<'choose' | 'uploading' | 'submitting'>('choose');
  const [message, setMessage] = useState<{ kind: 'error' | 'ok'; text: string; batchId?: string } | null>(null);
  const columns = catalog.stacks.find((st) => st.name === stack)?.columns ?? [];
  const [chosen, setChosen] = useState<Set<string>>(new Set());
  useEffect(() => setChosen(new Set(columns.map((c) => c.jsonPath))), [stack, catalog]);
  const itemsRef = useRef<Item[]>([]);
  const submission = useSubmissionId();
  itemsRef.current = items;

  const add = (files: FleetFile[]) => {
    setMessage(null);
    const images = files.filter(({ file: f }) => f.type.startsWith('image/') || IMAGE.test(f.name));
    const skipped = files.length - images.length;
    const added = images.map(({ file, path }, i) => ({ key: `${Date.now()}-${i}-${file.name}`, file, name: nameOf(path), sent: 0, status: 'waiting' as const }));
    // Over the whole selection, in order: the files already listed keep their fingerprints.
    const fps = fingerprints(workspaceId, [...itemsRef.current, ...added]);
    const next: Item[] = [...itemsRef.current, ...added.map((it, i) => ({ ...it, fingerprint: fps[itemsRef.current.length + i]! }))];
    if (next.length > MAX_FILES) {
      setMessage({ kind: 'error', text: `A batch holds up to ${fmt.format(MAX_FILES)} photos; ${fmt.format(next.length)} were chosen. Split the folder.` });
      return;
    }
    setItems(next);
    if (skipped > 0) setMessage({ kind: 'error', text: `${fmt.format(skipped)} file(s) that are not photos were left out.` });
  };

  const onDrop = async (e: DragEvent) => {
    const entries = [...e.dataTransfer.items].map((i) => i.webkitGetAsEntry()).filter((x): x is FileSystemEntry => x !== null);
    const files = entries.length ? (await Promise.all(entries.map(filesOf))).flat() : fleetFiles(e.dataTransfer.files);
    add(files);
  };

  const update = (key: string, patch: Partial<Item>) => setItems((all) => all.map((it) => (it.key === key ? { ...it, ...patch } : it)));

  const uploadOne = async (item: Item): Promise<Item> => {
    update(item.key, { status: 'uploading', sent: 0 });
    const r = await tusUpload(workspaceId, item.file, item.name, item.fingerprint, (sent) => update(item.key, { sent }));
    const patch = 'uploadId' in r ? { status: 'done' as const, sent: item.file.size, uploadId: r.uploadId } : { status: 'failed' as const, error: r.error };
    update(item.key, patch);
    return { ...item, ...patch };
  };

  const uploadAll = async () => {
    setPhase('uploading');
    setMessage(null);
    // The outcome of each file is kept here, not read back from state (a render may still be pending).
    const now = [...itemsRef.current];
    const queue = now.map((it, i) => [it, i] as const).filter(([it]) => it.status !== 'done');
    await inParallel(queue, async ([it, i]) => {
      now[i] = await uploadOne(it);
    });
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
      const body = { preset: stack, ...columnsBody(columns, chosen), uploads: done.map((it) => ({ id: it.uploadId!, name: it.name })) };
      const batch = await postOnce<{ id: string; counts: { total: number } }>(`/api/v1/workspaces/${workspaceId}/batches`, body, submission.idFor(body));
      submission.done();
      void forgetUploads(done.map((it) => it.fingerprint));
      setItems([]);
      setMessage({ kind: 'ok', text: `Batch ${batch.id} started with ${fmt.format(batch.counts.total)} photos.`, batchId: batch.id });
      onSubmitted();
    } catch (err) {
      setMessage({ kind: 'error', text: err instanceof ConsoleError ? err.message : 'The batch could not be started; try again.' });
    } finally {
      setPhase('choose');
    }
  };

  const total = items.reduce((n, it) => n + it.file.size, 0);
  const sent = items.reduce((n, it) => n + (it.status === 'done' ? it.file.size : it.sent), 0);
  const uploaded = items.filter((it) => it.status === 'done').length;
  const failed = items.filter((it) => it.status === 'failed').length;
  const busy = phase !== 'choose';
  return (
    <>
      <DropZone testId="dropzone" onDrop={onDrop}>
        <p>Drop a folder or photos here, or</p>
        <p className="actions">
          <label className="button secondary">
            Choose photos
            <input type="file" multiple accept="image/*,.heic,.heif" className="visually-hidden" disabled={busy} onChange={(e) => add(fleetFiles(e.target.files))} />
          </label>
          <label className="button secondary">
            Choose a folder
            <input type="file" className="visually-hidden" disabled={busy} {...{ webkitdirectory: '' }} onChange={(e) => add(fleetFiles(e.target.files))} />
          </label>
        </p>
      </DropZone>
      <div className="inline">
        <label htmlFor="batch-stack">Lenses</label>
        <select id="batch-stack" value={stack} disabled={busy} onChange={(e) => setStack(e.target.value)}>
          {catalog.stacks.map((s) => (
            <option key={s.name} value={s.name} title={s.description}>
              {s.name}
            </option>
          ))}
        </select>
        <button type="button" disabled={busy || items.length === 0 || chosen.size === 0} onClick={() => void uploadAll()}>
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
      <ColumnPicker columns={columns} chosen={chosen} onChange={setChosen} disabled={busy} />
      {items.length > 0 && (
        <>
          <p className="hint" aria-live="polite" data-testid="upload-summary">
            {fmt.format(uploaded)} of {fmt.format(items.length)} uploaded · {mb(sent)} of {mb(total)} MB
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
      {message && <Outcome message={message} />}
    </>
  );
}

function Outcome({ message }: { message: { kind: 'error' | 'ok'; text: string; batchId?: string } }) {
  return (
    <>
      <p role={message.kind === 'error' ? 'alert' : 'status'} className={message.kind === 'error' ? 'error' : 'ok'}>
        {message.text}
      </p>
      {message.batchId && (
        <p>
          <Link href={`/batches/${message.batchId}`}>Open the batch’s page</Link>
        </p>
      )}
    </>
  );
}

function VehicleBatch({ workspaceId, offer, onSubmitted }: { workspaceId: string; offer: NonNullable<Catalog['vehicles']>; onSubmitted: () => void }) {
  const [files, setFiles] = useState<FleetFile[]>([]);
  const [sheet, setSheet] = useState<{ name: string; rows: SheetRow[] } | null>(null);
  const [phase, setPhase] = useState<'choose' | 'uploading' | 'submitting'>('choose');
  const [progress, setProgress] = useState<{ sentBytes: number; totalBytes: number; photosDone: number; photos: number; failed: string[] } | null>(null);
  const [message, setMessage] = useState<{ kind: 'error' | 'ok'; text: string; batchId?: string } | null>(null);
  const [chosen, setChosen] = useState<Set<string>>(() => new Set(offer.columns.map((c) => c.jsonPath)));
  const uploaded = useRef(new Map<File, string>());
  const submission = useSubmissionId();

  const grouped = groupFleet(files);
  const vehicles = reviewFleet(grouped.vehicles, sheet?.rows ?? []);
  const going = vehicles.filter((v) => !v.refused);
  const refused = vehicles.filter((v) => v.refused);
  const busy = phase !== 'choose';

  const takeSheet = async (file: File) => {
    try {
      setSheet({ name: file.name, rows: await readSheet(file) });
    } catch (err) {
      setSheet(null);
      setMessage({ kind: 'error', text: `${file.name}: ${err instanceof Error ? err.message : 'could not be read'}` });
    }
  };

  const choose = async (next: FleetFile[]) => {
    setMessage(null);
    setFiles(next);
    const found = groupFleet(next).sheet;
    if (found) await takeSheet(found);
  };

  const onDrop = async (e: DragEvent) => {
    const entries = [...e.dataTransfer.items].map((i) => i.webkitGetAsEntry()).filter((x): x is FileSystemEntry => x !== null);
    const files = (await Promise.all(entries.map(filesOf))).flat();
    // One folder dropped is the fleet; several vehicle folders (and a spreadsheet) dropped together are one too.
    await choose(entries.length > 1 ? files.map((f) => ({ ...f, path: `dropped/${f.path}` })) : files);
  };

  const start = async () => {
    if (going.length === 0) return;
    setProgress(null);
    if (going.length > offer.maxVehicles) {
      setMessage({ kind: 'error', text: `A batch holds up to ${fmt.format(offer.maxVehicles)} vehicles; split the folder.` });
      return;
    }
    setMessage(null);
    setPhase('uploading');
    const photos = going.flatMap((v) => v.photos);
    const fps = new Map(fingerprints(workspaceId, photos.map((p) => ({ file: p.file, name: nameOf(p.path) }))).map((fp, i) => [photos[i]!, fp]));
    const totalBytes = photos.reduce((n, p) => n + p.file.size, 0);
    const sentOf = new Map<File, number>();
    const failed: string[] = [];
    let photosDone = 0;
    const report = () => setProgress({ sentBytes: [...sentOf.values()].reduce((a, b) => a + b, 0), totalBytes, photosDone, photos: photos.length, failed: [...failed] });
    report();
    await inParallel(photos, async (p) => {
      if (!uploaded.current.has(p.file)) {
        const r = await tusUpload(workspaceId, p.file, nameOf(p.path), fps.get(p)!, (sent) => {
          sentOf.set(p.file, sent);
          report();
        });
        if ('error' in r) {
          failed.push(`${p.path}: ${r.error}`);
          report();
          return;
        }
        uploaded.current.set(p.file, r.uploadId);
      }
      sentOf.set(p.file, p.file.size);
      photosDone++;
      report();
    });
    if (failed.length) {
      setPhase('choose');
      setMessage({ kind: 'error', text: `${fmt.format(failed.length)} photo(s) did not upload; nothing was started. Press the button again to upload the rest.` });
      return;
    }
    setPhase('submitting');
    try {
      const body = {
        ...columnsBody(offer.columns, chosen),
        vehicles: going.map((v) => ({
          name: v.name,
          vehicle: { ...(v.vin ? { vin: v.vin } : {}), ...(v.mileage !== undefined ? { mileage: v.mileage } : {}), ...(v.make ? { make: v.make } : {}), ...(v.model ? { model: v.model } : {}), ...(v.year !== undefined ? { year: v.year } : {}) },
          uploads: v.photos.map((p) => ({ id: uploaded.current.get(p.file)!, name: nameOf(p.path) })),
        })),
      };
      const batch = await postOnce<{ id: string; counts: { total: number } }>(`/api/v1/workspaces/${workspaceId}/batches`, body, submission.idFor(body));
      submission.done();
      void forgetUploads([...fps.values()]);
      // The upload's figures stay shown under the outcome; the fleet is cleared for the next one.
      setFiles([]);
      setSheet(null);
      uploaded.current.clear();
      setMessage({ kind: 'ok', text: `Batch ${batch.id} started with ${fmt.format(batch.counts.total)} vehicles.`, batchId: batch.id });
      onSubmitted();
    } catch (err) {
      setMessage({ kind: 'error', text: err instanceof ConsoleError ? err.message : 'The batch could not be started; try again.' });
    } finally {
      setPhase('choose');
    }
  };

  return (
    <>
      <DropZone testId="fleet-dropzone" onDrop={onDrop}>
        <p>Drop a folder holding one folder per vehicle (up to {offer.maxPhotos} photos each), or</p>
        <p className="actions">
          <label className="button secondary">
            Choose the fleet folder
            <input
              type="file"
              className="visually-hidden"
              disabled={busy}
              {...{ webkitdirectory: '' }}
              onChange={(e) => void choose(fleetFiles(e.target.files))}
            />
          </label>
          <label className="button secondary">
            Add a spreadsheet
            <input type="file" accept=".csv,.xlsx,text/csv" className="visually-hidden" disabled={busy} onChange={(e) => e.target.files?.[0] && void takeSheet(e.target.files[0])} />
          </label>
        </p>
        <p className="hint">The spreadsheet (CSV or XLSX) has a row per folder: folder, VIN, mileage, make, model, year.</p>
      </DropZone>
      {sheet && (
        <p className="hint" data-testid="sheet">
          Spreadsheet {sheet.name}: {fmt.format(sheet.rows.length)} row(s).
        </p>
      )}
      {(grouped.loose > 0 || grouped.skipped > 0) && (
        <p className="hint">
          {grouped.loose > 0 && `${fmt.format(grouped.loose)} photo(s) outside any vehicle folder are left out. `}
          {grouped.skipped > 0 && `${fmt.format(grouped.skipped)} file(s) that are not photos are left out.`}
        </p>
      )}
      {vehicles.length > 0 && (
        <section aria-labelledby="review-h" className="review">
          <h3 id="review-h">
            Review: {fmt.format(going.length)} vehicle(s) will be analyzed ({fmt.format(going.length)} credit{going.length === 1 ? '' : 's'}), {fmt.format(refused.length)} refused
          </h3>
          <div className="table-wrap">
            <table data-testid="fleet-review">
              <caption className="visually-hidden">Vehicles found, before anything is uploaded or charged</caption>
              <thead>
                <tr>
                  <th scope="col">Vehicle</th>
                  <th scope="col">VIN</th>
                  <th scope="col">Mileage</th>
                  <th scope="col">Photos</th>
                  <th scope="col">Outcome</th>
                </tr>
              </thead>
              <tbody>
                {vehicles.map((v: Vehicle) => (
                  <tr key={v.key} className={v.refused ? 'refused' : undefined}>
                    <th scope="row">{v.name}</th>
                    <td>{v.vin ?? '—'}</td>
                    <td>{v.mileage !== undefined ? fmt.format(v.mileage) : '—'}</td>
                    <td>{fmt.format(v.photos.length)}</td>
                    <td>{v.refused ? <span className="error">Refused: {v.refused}</span> : 'will be analyzed'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <ColumnPicker columns={offer.columns} chosen={chosen} onChange={setChosen} disabled={busy} />
          <p className="inline">
            <button type="button" disabled={busy || going.length === 0 || chosen.size === 0} onClick={() => void start()}>
              Upload {fmt.format(going.reduce((n, v) => n + v.photos.length, 0))} photos and analyze {fmt.format(going.length)} vehicle(s)
            </button>
            {!busy && (
              <button type="button" className="quiet" onClick={() => void choose([]).then(() => setSheet(null))}>
                Clear
              </button>
            )}
          </p>
        </section>
      )}
      {progress && (
        <div data-testid="fleet-progress">
          <p className="hint" aria-live="polite">
            {fmt.format(progress.photosDone)} of {fmt.format(progress.photos)} photos uploaded · {mb(progress.sentBytes)} of {mb(progress.totalBytes)} MB
            {phase === 'submitting' && ' · starting the batch…'}
          </p>
          <progress max={Math.max(1, progress.totalBytes)} value={progress.sentBytes} aria-label="Photos uploaded">
            {Math.round((progress.sentBytes / Math.max(1, progress.totalBytes)) * 100)}%
          </progress>
          {progress.failed.length > 0 && (
            <ul className="error">
              {progress.failed.slice(0, 20).map((f) => (
                <li key={f}>{f}</li>
              ))}
            </ul>
          )}
        </div>
      )}
      {message && <Outcome message={message} />}
    </>
  );
}

