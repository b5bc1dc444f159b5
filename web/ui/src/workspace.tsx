import { Fragment, useCallback, useEffect, useRef, useState, type ReactNode } from 'react';
import { useLocation } from 'wouter';
import type { SessionInfo, Workspace } from './api.ts';

const KEY = 'lenstack.workspace';
const EVENT = 'lenstack:workspace';

/**
 * The workspace the console shows, shared by its sections (the overview, Requests, Usage &
 * billing): kept in this tab's sessionStorage, so moving between sections keeps it. A workspace
 * one just left falls back to the first one left.
 */
export function useWorkspace(session: SessionInfo): [Workspace | undefined, (id: string) => void] {
  const [id, setId] = useState<string | null>(() => sessionStorage.getItem(KEY));
  useEffect(() => {
    const onChange = () => setId(sessionStorage.getItem(KEY));
    window.addEventListener(EVENT, onChange);
    return () => window.removeEventListener(EVENT, onChange);
  }, []);
  const choose = useCallback((next: string) => {
    sessionStorage.setItem(KEY, next);
    window.dispatchEvent(new Event(EVENT));
  }, []);
  return [session.workspaces.find((w) => w.id === id) ?? session.workspaces[0], choose];
}

/** The address the console was opened at, and whether the person has moved from it since. */
const openedAt = window.location.pathname;
let moved = false;

/**
 * The section's heading: the workspace's name and, with more than one, the switcher. Shown after
 * moving to another address (not on the page the console was opened at, and not when only the
 * query string changes, as a filter does), the heading takes the focus, so a screen reader says
 * where one is and the keyboard starts from the top of the new section (docs/decisions.md).
 */
export function WorkspaceBar({ session, workspace, onChoose, section }: { session: SessionInfo; workspace: Workspace; onChoose: (id: string) => void; section?: string }) {
  const [path] = useLocation();
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    if (path !== openedAt) moved = true;
    if (moved) heading.current?.focus();
  }, [path]);
  // The tab's title names the section, so history, tabs and screen readers tell them apart.
  useEffect(() => {
    document.title = `${section ?? 'Overview'} · ${workspace.name} · Lenstack`;
    return () => {
      document.title = 'Lenstack console';
    };
  }, [section, workspace.name]);
  return (
    <div className="bar">
      <h1 tabIndex={-1} ref={heading}>
        {section ? (
          <>
            {section} <span className="ws-name">· {workspace.name}</span>
          </>
        ) : (
          workspace.name
        )}
      </h1>
      {session.workspaces.length > 1 && (
        <span className="switcher">
          <label htmlFor="ws-select">Workspace</label>
          <select id="ws-select" value={workspace.id} onChange={(e) => onChoose(e.target.value)}>
            {session.workspaces.map((w) => (
              <option key={w.id} value={w.id}>
                {w.name} ({w.role})
              </option>
            ))}
          </select>
        </span>
      )}
    </div>
  );
}

/** A signed-in section without a workspace yet. */
export function NoWorkspace() {
  return (
    <section className="card narrow">
      <h1>No workspace yet</h1>
      <p>Confirm your e-mail address to get your workspace, or ask a workspace owner to invite you.</p>
    </section>
  );
}

/**
 * A section's page: its heading with the workspace switcher, then its content for the workspace
 * chosen; a new workspace mounts new content (keyed), so nothing of the last one lingers.
 */
export function SectionPage({ session, section, children }: { session: SessionInfo; section?: string; children: (workspace: Workspace) => ReactNode }) {
  const [workspace, choose] = useWorkspace(session);
  if (!workspace) return <NoWorkspace />;
  return (
    <>
      <WorkspaceBar session={session} workspace={workspace} onChoose={choose} {...(section ? { section } : {})} />
      <Fragment key={workspace.id}>{children(workspace)}</Fragment>
    </>
  );
}
