import { useEffect, useState } from 'react';
import { call, ConsoleError, type CaughtMail } from '../api.ts';

const URL_RE = /(https?:\/\/[^\s<>"]+)/g;

/** Development only: the mail the console sent while no SMTP server is configured. */
export function DevMailbox() {
  const [messages, setMessages] = useState<CaughtMail[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    call<{ messages: CaughtMail[] }>('GET', '/api/v1/dev/mailbox')
      .then((r) => setMessages(r.messages))
      .catch((err: unknown) => setError(err instanceof ConsoleError && err.status === 404 ? 'This server sends real mail: there is no development mailbox.' : 'Could not read the mailbox.'));
  }, []);
  return (
    <section className="card">
      <p className="devbanner" role="note">
        Development mailbox: no SMTP server is configured, so mail stays here instead of being delivered.
      </p>
      <h1>Development mailbox</h1>
      {error && <p className="error">{error}</p>}
      {messages?.length === 0 && <p>No mail yet.</p>}
      {messages?.map((m) => (
        <article key={m.id} className="mail">
          <h2>{m.subject}</h2>
          <p className="hint">
            To {m.to.join(', ')} · {new Date(m.receivedAt).toLocaleString()}
          </p>
          <pre>
            {m.text.split(URL_RE).map((part, i) =>
              i % 2 === 1 ? (
                <a key={i} href={part}>
                  {part}
                </a>
              ) : (
                part
              ),
            )}
          </pre>
        </article>
      ))}
    </section>
  );
}
