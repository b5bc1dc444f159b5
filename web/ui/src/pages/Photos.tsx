import { useQueryClient, type InfiniteData } from '@tanstack/react-query';
import { useEffect, useRef, useState, type DragEvent } from 'react';
import { call, ConsoleError, type SessionInfo } from '../api.ts';
import { DropZone } from '../DropZone.tsx';
import { ErrorNote } from '../ErrorNote.tsx';
import { useGet, usePages, ws } from '../query.ts';
import { NoWorkspace, useWorkspace, WorkspaceBar } from '../workspace.tsx';

interface BilledLens {
  lens: string;
  credits: number;
  billedAt: string;
}
interface Photo {
  sha256: string;
  lastAnalyzedAt: string;
  totalCreditsSpent: number;
  lenses: BilledLens[];
}
interface PhotoPage {
  photos: Photo[];
  next: string | null;
}
interface Detail {
  sha256: string;
  lenses: Record<string, unknown>;
  billing: BilledLens[];
}
interface Lookup {
  sha256: string;
  matchType: 'exact' | 'fuzzy' | 'none';
  hammingDistance?: number;
  photo?: { sha256: string; lastAnalyzedAt: string; lenses: string[] };
}

const fmt = new Intl.NumberFormat('en');
const when = (iso: string) => new Date(iso).toLocaleString();
const short = (sha256: string) => sha256.slice(0, 12);

/**
 * Photos (/photos): the workspace's registry as thumbnails, newest analyzed first, each with its
 * lenses and what each cost when; a photo opens on its lens records; a dropped photo is looked up
 * (exact, then similar) without being kept; owners and admins can erase a photo.
 */
export function Photos({ session }: { session: SessionInfo }) {
  const [workspace, choose] = useWorkspace(session);
  if (!workspace) return <NoWorkspace />;
  return (
    <>
      <WorkspaceBar session={session} workspace={workspace} onChoose={choose} section="Photos" />
      <PhotosPanel key={workspace.id} workspaceId={workspace.id} mayDelete={workspace.role !== 'member'} />
    </>
  );
}

function PhotosPanel({ workspaceId, mayDelete }: { workspaceId: string; mayDelete: boolean }) {
  const base = `/api/v1/workspaces/${workspaceId}/photos`;
  const client = useQueryClient();
  const listKey = ws(workspaceId, 'photos', 'pages');
  const list = usePages<PhotoPage>(listKey, base);
  const photos = list.data ? list.data.pages.flatMap((p) => p.photos) : null;
  const error = list.error ? 'Could not load the photos; try again.' : null;
  const [open, setOpen] = useState<string | null>(null);
  const [noBytes, setNoBytes] = useState<Set<string>>(new Set());
  const [notice, setNotice] = useState<string | null>(null);
  const registryHeading = useRef<HTMLHeadingElement>(null);
  const erased = (sha256: string) => {
    setOpen(null);
    // Gone from the pages shown at once (the cursors stay valid: they point past older photos).
    client.setQueryData<InfiniteData<PhotoPage, string | null>>(listKey, (old) =>
      old ? { ...old, pages: old.pages.map((p) => ({ ...p, photos: p.photos.filter((x) => x.sha256 !== sha256) })) } : old,
    );
    client.removeQueries({ queryKey: ws(workspaceId, 'photos', 'one', sha256) });
    setNotice(`Photo ${short(sha256)} was erased with its lens records.`);
    // The records' section is gone with the photo: keyboard and screen reader go back to the list.
    registryHeading.current?.focus();
  };
  return (
    <>
      <FindByPhoto base={base} onOpen={setOpen} />
      <section className="card" aria-labelledby="photos-h">
        <div className="bar">
          <h2 id="photos-h" tabIndex={-1} ref={registryHeading}>
            Registry
          </h2>
          <button type="button" className="quiet" onClick={() => void list.refetch()}>
            Refresh
          </button>
        </div>
        <ErrorNote text={error} />
        <p role="status">{notice}</p>
        {photos === null ? (
          <p aria-busy="true">Loading photos…</p>
        ) : photos.length === 0 ? (
          <p>No photos yet: photos analyzed with this workspace’s keys appear here.</p>
        ) : (
          <ol className="photo-grid" aria-label="Photos in the registry" data-testid="photos">
            {photos.map((p) => (
              <li key={p.sha256} className="photo-card" data-testid={`photo-${p.sha256}`}>
                {noBytes.has(p.sha256) ? (
                  <div className="no-thumb">
                    <p className="hint">Original no longer kept</p>
                  </div>
                ) : (
                  <img
                    src={`/api/v1/workspaces/${workspaceId}/thumbnails/${p.sha256}`}
                    alt={`Photo ${short(p.sha256)}, analyzed ${when(p.lastAnalyzedAt)}`}
                    width={256}
                    height={256}
                    loading="lazy"
                    onError={() => setNoBytes((s) => new Set(s).add(p.sha256))}
                  />
                )}
                <h3 className="name">
                  <code>{short(p.sha256)}</code>
                </h3>
                <dl>
                  {p.lenses.map((l) => (
                    <div key={l.lens}>
                      <dt>{l.lens}</dt>
                      <dd>
                        {fmt.format(l.credits)} {l.credits === 1 ? 'credit' : 'credits'}, billed {when(l.billedAt)}
                      </dd>
                    </div>
                  ))}
                </dl>
                <button type="button" className="quiet" aria-expanded={open === p.sha256} aria-controls="photo-records" onClick={() => setOpen(open === p.sha256 ? null : p.sha256)}>
                  Records of {short(p.sha256)}
                </button>
              </li>
            ))}
          </ol>
        )}
        {list.hasNextPage && (
          <p>
            <button type="button" className="quiet" disabled={list.isFetchingNextPage} onClick={() => void list.fetchNextPage()}>
              Show older
            </button>
          </p>
        )}
      </section>
      {open && <Records key={open} workspaceId={workspaceId} base={base} sha256={open} mayDelete={mayDelete} onErased={erased} onClose={() => setOpen(null)} />}
    </>
  );
}

/** One photo's lens records as JSON, with its erasure behind a confirmation. */
function Records({
  workspaceId,
  base,
  sha256,
  mayDelete,
  onErased,
  onClose,
}: {
  workspaceId: string;
  base: string; sha256: string; mayDelete: boolean; onErased: (sha256: string) => void; onClose: () => void }) {
  const read = useGet<Detail>(ws(workspaceId, 'photos', 'one', sha256), `${base}/${sha256}`);
  const detail = read.data ?? null;
  const [eraseError, setError] = useState<string | null>(null);
  const error = eraseError ?? (read.error ? 'Could not load this photo’s records.' : null);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    heading.current?.focus();
  }, [sha256]);
  const erase = async () => {
    setBusy(true);
    setError(null);
    try {
      await call('DELETE', `${base}/${sha256}`);
      onErased(sha256);
    } catch (e) {
      setError(e instanceof ConsoleError ? e.message : 'Could not erase the photo; try again.');
      setBusy(false);
    }
  };
  return (
    <section className="card" id="photo-records" aria-labelledby="records-h" data-testid="photo-records">
      <div className="bar">
        <h2 id="records-h" tabIndex={-1} ref={heading}>
          Records of photo <code>{short(sha256)}</code>
        </h2>
        <button type="button" className="quiet" onClick={onClose}>
          Close
        </button>
      </div>
      <p className="hint records-sha">
        SHA-256 <code>{sha256}</code>
      </p>
      <ErrorNote text={error} />
      {detail === null ? (
        !error && <p aria-busy="true">Loading records…</p>
      ) : (
        <pre className="scroll" tabIndex={0} aria-label="Lens records as JSON">
          {JSON.stringify(detail.lenses, null, 2)}
        </pre>
      )}
      {mayDelete &&
        (confirming ? (
          <div role="group" aria-labelledby="erase-q">
            <p id="erase-q">Erase this photo? Its lens records, the vehicle reports that include it and its original bytes go; a new analysis bills every lens again.</p>
            <span className="actions">
              <button type="button" className="danger" disabled={busy} onClick={() => void erase()}>
                Erase photo
              </button>
              <button type="button" className="quiet" disabled={busy} onClick={() => setConfirming(false)}>
                Keep it
              </button>
            </span>
          </div>
        ) : (
          <p>
            <button type="button" className="secondary" onClick={() => setConfirming(true)}>
              Delete…
            </button>
          </p>
        ))}
    </section>
  );
}

function base64Of(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ''));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

/** Drop a photo (or pick one) to find it in the registry; the photo is not kept. */
function FindByPhoto({ base, onOpen }: { base: string; onOpen: (sha256: string) => void }) {
  const [result, setResult] = useState<Lookup | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const search = async (file: File | undefined) => {
    if (!file) return;
    setBusy(true);
    setError(null);
    setResult(null);
    try {
      setResult(await call<Lookup>('POST', `${base}/lookup`, { imageBase64: await base64Of(file) }));
    } catch (e) {
      setError(e instanceof ConsoleError ? e.message : 'Could not look the photo up; try again.');
    } finally {
      setBusy(false);
    }
  };
  const onDrop = async (e: DragEvent) => search(e.dataTransfer.files[0]);
  return (
    <section className="card" aria-labelledby="find-h">
      <h2 id="find-h">Find by photo</h2>
      <DropZone testId="photo-dropzone" onDrop={onDrop}>
        <p>Drop a photo here to find it in this workspace’s registry (free; the photo is not kept).</p>
        <label>
          Or choose one <input type="file" accept="image/*" onChange={(e) => void search(e.target.files?.[0])} />
        </label>
      </DropZone>
      <ErrorNote text={error} />
      <div role="status" data-testid="lookup-result">
        {busy && <p>Looking…</p>}
        {result &&
          (result.matchType === 'none' || !result.photo ? (
            <p>Not in this workspace’s registry.</p>
          ) : (
            <p>
              {result.matchType === 'exact' ? 'Found: the same photo' : `Found a similar photo (${result.hammingDistance} bits apart)`}, <code>{short(result.photo.sha256)}</code>, analyzed {when(result.photo.lastAnalyzedAt)}.{' '}
              <button type="button" className="quiet" onClick={() => onOpen(result.photo!.sha256)}>
                Open its records
              </button>
            </p>
          ))}
      </div>
    </section>
  );
}
