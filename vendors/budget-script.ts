import { defineScript, type CommandParser } from 'redis';

/**
 * One vendor's budget, shared by every worker: a token bucket for requests and one for tokens in
 * one Redis hash, changed only by this script (Redis runs a script alone, so no two workers
 * interleave between a check and its write). docs/decisions.md, "Vendor quotas".
 *
 * Requests: the bucket holds at most B = max(⌈rpm/60⌉, R + 1) calls (a second of the limit) and
 * refills at f × (rpm − B − ⌈rpm/120⌉) per minute, so no 60-second span gets more than
 * f × rpm − ⌈rpm/120⌉ calls: half a second of headroom for the time between a grant and the call
 * reaching the vendor. R = ⌈⌈rpm/60⌉ × reserve⌉ of the bucket is for interactive calls only: a
 * batch call needs R + 1 calls in the bucket, an interactive one needs 1. Batch calls keep the
 * bucket at R at most, and an interactive call finds its slot there at once.
 * Tokens: the bucket holds tpm/60, refills at f × tpm × (1 − 1/60 − 1/120) per minute; a call needs the bucket
 * not in debt (batch: at least its reserve), takes its estimate, and its real use corrects that
 * afterwards, so a bucket may go into debt and the next calls wait until it is paid back.
 * f, the adaptive factor (0.05 … 1): × 0.7 on a 429 for a call granted after the last cut (so one
 * congestion event is one cut however many calls it answered 429), + 1/(4 × rpm) per success
 * (a quarter of the limit per minute at most). A 429's Retry-After pauses every call until then.
 *
 * KEYS[1]  the vendor's hash: lvl, tok (bucket levels), ts (last refill, ms), f, till (paused
 *          until, ms), cut (time of the last cut, ms)
 * ARGV     op ('take' | 'ok' | 'throttled' | 'peek'), now ('' = Redis TIME), rpm, tpm (0 = none),
 *          reserve (0…0.9), lane ('i' | 'b'), n (take: estimated tokens; ok: used − estimated
 *          tokens; throttled: Retry-After in ms, 0 = none), grantedAt (throttled: when the call
 *          that got the 429 was granted)
 * Reply    { granted (1|0), waitMs, now, f (string), lvl (string), tok (string) }
 */
export const VENDOR_BUDGET_LUA = `
local op = ARGV[1]
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local rpm = tonumber(ARGV[3])
local tpm = tonumber(ARGV[4])
local reserve = tonumber(ARGV[5])
local lane = ARGV[6]
local n = tonumber(ARGV[7])
local grantedAt = tonumber(ARGV[8]) or 0

local base = math.max(1, math.ceil(rpm / 60))
local R = 0
if reserve > 0 then R = math.max(1, math.ceil(base * reserve)) end
local B = math.max(base, R + 1)
local Bt = tpm / 60
local Rt = Bt * reserve

local s = redis.call('HMGET', KEYS[1], 'lvl', 'tok', 'ts', 'f', 'till', 'cut')
local lvl = tonumber(s[1]) or B
local tok = tonumber(s[2]) or Bt
local ts = tonumber(s[3]) or now
local f = tonumber(s[4]) or 1
local till = tonumber(s[5]) or 0
local cut = tonumber(s[6]) or 0

local r = f * math.max(rpm - B - math.ceil(rpm / 120), rpm / 2) / 60000
local rt = f * tpm * (1 - 1 / 60 - 1 / 120) / 60000
if now > ts then
  if rpm > 0 then lvl = math.min(B, lvl + (now - ts) * r) end
  if tpm > 0 then tok = math.min(Bt, tok + (now - ts) * rt) end
  ts = now
end

local granted = 0
local wait = 0
if op == 'take' then
  if now < till then
    wait = till - now
  else
    local need, needTok = 1, 0
    if lane ~= 'i' then need, needTok = R + 1, Rt end
    local okR = rpm <= 0 or lvl >= need
    local okT = tpm <= 0 or tok >= needTok
    if okR and okT then
      granted = 1
      if rpm > 0 then lvl = lvl - 1 end
      if tpm > 0 then tok = tok - n end
    else
      if rpm > 0 and lvl < need then wait = math.max(wait, (need - lvl) / r) end
      if tpm > 0 and tok < needTok then wait = math.max(wait, (needTok - tok) / rt) end
      wait = math.max(1, math.ceil(wait))
    end
  end
elseif op == 'ok' then
  if tpm > 0 then tok = math.max(-tpm, tok - n) end
  local inc = 1 / 240
  if rpm > 0 then inc = 1 / (4 * rpm) end
  f = math.min(1, f + inc)
elseif op == 'throttled' then
  if grantedAt >= cut then
    f = math.max(0.05, f * 0.7)
    cut = now
  end
  lvl = math.min(lvl, 0)
  tok = math.min(tok, 0)
  if now + n > till then till = now + n end
  -- Nothing refills while paused: the first call after the pause waits for its own slot.
  if till > ts then ts = till end
end

if op ~= 'peek' then
  redis.call('HSET', KEYS[1], 'lvl', tostring(lvl), 'tok', tostring(tok), 'ts', tostring(ts), 'f', tostring(f), 'till', tostring(till), 'cut', tostring(cut))
  redis.call('PEXPIRE', KEYS[1], 3600000)
end
return { granted, wait, now, tostring(f), tostring(lvl), tostring(tok) }
`;

export interface BudgetScriptArgs {
  key: string;
  op: 'take' | 'ok' | 'throttled' | 'peek';
  /** ms since the epoch; undefined = Redis server time. */
  now: number | undefined;
  rpm: number;
  tpm: number;
  reserve: number;
  lane: 'i' | 'b';
  n: number;
  grantedAt?: number;
}

export const vendorBudgetScript = defineScript({
  SCRIPT: VENDOR_BUDGET_LUA,
  parseCommand(parser: CommandParser, a: BudgetScriptArgs) {
    parser.push('1');
    parser.pushKey(a.key);
    parser.push(a.op, a.now === undefined ? '' : String(Math.floor(a.now)), String(a.rpm), String(a.tpm), String(a.reserve), a.lane, String(Math.round(a.n)), String(a.grantedAt ?? 0));
  },
  transformReply: undefined as unknown as () => Array<number | string>,
});
