import { useState } from 'react';
import { Link } from 'wouter';
import type { Credits } from './api.ts';
import { call } from './api.ts';
import { ActionNotes, ErrorNote } from './ErrorNote.tsx';
import { fmt, usd } from './format.ts';
import { useGet, ws } from './query.ts';
import { useAction } from './useAction.ts';

/** A workspace's balance, from the cache (the overview and Usage & billing read the same entry). */
export function useCredits(workspaceId: string) {
  return useGet<Credits>(ws(workspaceId, 'credits'), `/api/v1/workspaces/${workspaceId}/credits`);
}

/**
 * The balance as the ledger has it, the card offer (owners of a personal workspace) and the packs
 * (owners and admins): on the overview and on Usage & billing.
 */
export function CreditsPanel({ workspaceId, canBuy, isOwner, usageLink = true }: { workspaceId: string; canBuy: boolean; isOwner: boolean; usageLink?: boolean }) {
  const credits = useCredits(workspaceId);
  if (!credits.data)
    return credits.error ? (
      <section className="card">
        <ErrorNote text="Could not load the credits; reload the page to try again." />
      </section>
    ) : (
      <section className="card" aria-busy="true">
        Loading credits…
      </section>
    );
  const { balance, card } = credits.data;
  return (
    <section className="card" aria-labelledby="credits-h">
      <div className="bar">
        <h2 id="credits-h">Credits</h2>
        <button type="button" className="quiet" disabled={credits.isFetching} onClick={() => void credits.refetch()}>
          Refresh
        </button>
      </div>
      <dl className="balances">
        <div>
          <dt>Available</dt>
          <dd data-testid="available">{fmt.format(balance.community + balance.purchased)}</dd>
        </div>
        <div>
          <dt>Community</dt>
          <dd data-testid="community">{fmt.format(balance.community)}</dd>
        </div>
        <div>
          <dt>Purchased</dt>
          <dd data-testid="purchased">{fmt.format(balance.purchased)}</dd>
        </div>
        <div>
          <dt>Reserved by running analyses</dt>
          <dd data-testid="reserved">{fmt.format(balance.reserved)}</dd>
        </div>
      </dl>
      {isOwner && card.offer && <AddCard workspaceId={workspaceId} />}
      {card.onFileSince && <p className="hint">A card is on file since {new Date(card.onFileSince).toLocaleDateString()}. Lenstack never charges it automatically.</p>}
      {canBuy && <BuyPacks workspaceId={workspaceId} />}
      {usageLink && (
        <p>
          <Link href="/usage">What each analysis, batch and purchase cost, day by day</Link> is under Usage &amp; billing.
        </p>
      )}
    </section>
  );
}

export function AddCard({ workspaceId }: { workspaceId: string }) {
  const action = useAction();
  const returned = new URLSearchParams(window.location.search).get('card');
  const add = () =>
    action.run({
      run: () => call<{ checkoutUrl?: string }>('POST', `/api/v1/workspaces/${workspaceId}/card`),
      fallback: 'Could not open the card form; nothing was stored. Try again.',
      after: (r) => {
        if (r.checkoutUrl) window.location.assign(r.checkoutUrl);
      },
    });
  return (
    <div className="addcard">
      <h3>Add a card, get 4,000 credits</h3>
      {returned === 'added' ? (
        <p role="status" className="notice">
          Thank you. The 4,000 credits appear here as soon as Stripe confirms the card.
        </p>
      ) : (
        <p className="hint">Once per person. The card is kept on file with Stripe and is never charged automatically: you only pay for packs you buy.</p>
      )}
      <button type="button" disabled={action.busy} onClick={() => void add()}>
        {action.busy ? 'Opening…' : 'Add a card'}
      </button>
      <ActionNotes action={action} />
    </div>
  );
}

interface Packs {
  purchases: 'stripe' | 'development' | 'unavailable';
  packs: Array<{ name: string; label: string; credits: number; priceCents: number; bonusCredits: number }>;
}

export function BuyPacks({ workspaceId }: { workspaceId: string }) {
  const packs = useGet<Packs>(ws(workspaceId, 'packs'), `/api/v1/workspaces/${workspaceId}/packs`);
  const action = useAction();
  const [chosen, setChosen] = useState<string | null>(null);
  const returned = new URLSearchParams(window.location.search).get('purchase');
  if (!packs.data) return null;
  const buy = (pack: string) => {
    setChosen(pack);
    return action.run({
      run: () => call<{ checkoutUrl?: string }>('POST', `/api/v1/workspaces/${workspaceId}/purchases`, { pack, idempotencyKey: crypto.randomUUID() }),
      fallback: 'The purchase did not go through; nothing was charged. Try again.',
      // Checkout elsewhere (Stripe), or granted at once (development payments): the balance and the packs' bonus change.
      after: (r) => {
        if (r.checkoutUrl) window.location.assign(r.checkoutUrl);
      },
      invalidate: [ws(workspaceId, 'credits'), ws(workspaceId, 'packs'), ws(workspaceId, 'usage')],
    });
  };
  return (
    <div className="packs">
      <h3>Buy credits</h3>
      {returned && returned !== 'cancelled' && (
        <p role="status" className="notice">
          Thank you. The credits appear here as soon as Stripe confirms the payment.
        </p>
      )}
      {packs.data.purchases === 'unavailable' ? (
        <p className="hint">Purchases are not available on this server (no payment processor is configured).</p>
      ) : (
        <>
          {packs.data.purchases === 'development' && (
            <p className="devbanner" role="note">
              Development payments: no card is charged.
            </p>
          )}
          <ul className="packlist">
            {packs.data.packs.map((p) => (
              <li key={p.name}>
                <span>
                  <strong>{p.label}</strong>: {fmt.format(p.credits)} credits{p.bonusCredits > 0 && <> + {fmt.format(p.bonusCredits)} first-pack bonus</>} for {usd.format(p.priceCents / 100)}
                </span>
                <button type="button" disabled={action.busy} onClick={() => void buy(p.name)} aria-label={`Buy the ${p.label} pack`}>
                  {action.busy && chosen === p.name ? 'Opening…' : 'Buy'}
                </button>
              </li>
            ))}
          </ul>
        </>
      )}
      <ActionNotes action={{ error: action.error, message: null }} />
    </div>
  );
}
