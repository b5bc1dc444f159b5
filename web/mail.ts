import { createHash } from 'node:crypto';
import { mailSafe } from '../accounts/names.ts';
import nodemailer from 'nodemailer';
import { simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/** What the console sends: verification links, magic links, invitations. */
export interface OutgoingMail {
  to: string;
  subject: string;
  text: string;
  html?: string;
}

export interface Mailer {
  send(mail: OutgoingMail): Promise<void>;
}

/** Mail over SMTP (smtp://user:pass@host:port, smtps://… for implicit TLS) with nodemailer. */
export function smtpMailer(smtpUrl: string, from: string): Mailer & { close(): void } {
  const transport = nodemailer.createTransport(smtpUrl);
  return {
    async send(mail) {
      await transport.sendMail({ from, ...mail });
    },
    close: () => transport.close(),
  };
}

export interface CaughtMail {
  id: number;
  receivedAt: string;
  from: string;
  to: string[];
  subject: string;
  text: string;
}

export interface MailCatcher {
  /** smtp://127.0.0.1:<port>, for SMTP_URL. */
  url: string;
  messages(): CaughtMail[];
  /** Resolves with the first message (already caught or still to come) that `match` accepts. */
  waitFor(match: (m: CaughtMail) => boolean, timeoutMs?: number): Promise<CaughtMail>;
  close(): Promise<void>;
}

/**
 * A real SMTP server on loopback that keeps what it receives in memory (the newest 200): the
 * development mailbox `npm start` runs when no SMTP_URL is set, and the sink tests read mail from.
 */
export async function startMailCatcher(opts: { port?: number } = {}): Promise<MailCatcher> {
  const caught: CaughtMail[] = [];
  const waiters: Array<{ match: (m: CaughtMail) => boolean; resolve: (m: CaughtMail) => void }> = [];
  let nextId = 1;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    // 1 MiB is far above any mail the console sends.
    size: 1024 * 1024,
    logger: false,
    onData(stream, session, callback) {
      simpleParser(stream)
        .then((parsed) => {
          const mail: CaughtMail = {
            id: nextId++,
            receivedAt: new Date().toISOString(),
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address),
            subject: parsed.subject ?? '',
            text: parsed.text ?? '',
          };
          caught.push(mail);
          if (caught.length > 200) caught.shift();
          for (const w of [...waiters]) {
            if (w.match(mail)) {
              waiters.splice(waiters.indexOf(w), 1);
              w.resolve(mail);
            }
          }
          callback();
        })
        .catch((err: Error) => callback(err));
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as { port: number }).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages: () => [...caught].reverse(),
    waitFor(match, timeoutMs = 10_000) {
      const found = caught.find(match);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const waiter = {
          match,
          resolve: (m: CaughtMail) => {
            clearTimeout(timer);
            resolve(m);
          },
        };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          reject(new Error(`no matching mail within ${timeoutMs} ms (${caught.length} caught)`));
        }, timeoutMs);
        waiters.push(waiter);
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** At most this many mails with one subject to one recipient per hour (docs/decisions.md). */
export const MAIL_PER_RECIPIENT = { limit: 3, windowMs: 3600_000 } as const;

/**
 * Mail to one address is bounded whoever asks for it: anyone can make the console send "you
 * already have an account", a confirmation or a sign-in link to any address, and a dozen requests
 * must not become a dozen mails in someone's inbox. Per recipient (hashed: no address in Redis
 * keys) and subject, in Redis for every console process; past the limit a mail is dropped
 * (logged, without the address) while the request answers as usual, so the limit tells nobody
 * anything. Fails open when Redis is away, like the sign-in throttle.
 */
export function limitedMailer(
  mailer: Mailer,
  limiter: { hit(buckets: Array<{ key: string; limit: number; windowMs: number }>): Promise<{ admitted: boolean }> },
  prefix: string,
  log?: { warn(obj: object, msg: string): void },
): Mailer {
  return {
    async send(mail) {
      const who = createHash('sha256').update(`${mail.to.trim().toLowerCase()}\n${mail.subject}`).digest('hex');
      let admitted = true;
      try {
        admitted = (await limiter.hit([{ key: `${prefix}console:mail:${who}`, ...MAIL_PER_RECIPIENT }])).admitted;
      } catch (err) {
        log?.warn({ err }, 'mail limit unavailable (Redis); sending anyway');
      }
      if (!admitted) {
        log?.warn({ subject: mail.subject, recipient: who.slice(0, 12) }, 'mail not sent: this recipient had enough of it this hour');
        return;
      }
      await mailer.send(mail);
    },
  };
}

/**
 * The invitation to a workspace. People's names go in neutralised (no line breaks, links or
 * addresses of their making: accounts/names.ts); the inviter is named by their confirmed address as well.
 */
export function invitationMail(args: {
  to: string;
  inviter: { name: string; email: string };
  workspaceName: string;
  role: string;
  acceptUrl: string;
}): OutgoingMail {
  const inviter = mailSafe(args.inviter.name);
  const workspace = mailSafe(args.workspaceName);
  return {
    to: args.to,
    subject: `You are invited to ${workspace} on Lenstack`,
    text: `Hello,\n\n${inviter ? `${inviter} <${args.inviter.email}>` : args.inviter.email} invited you to the Lenstack workspace "${workspace}" as ${args.role}.\nAccept within 7 days (sign in, or create an account, with this address):\n\n${args.acceptUrl}\n\nIf you did not expect this, ignore this mail.\n`,
  };
}
