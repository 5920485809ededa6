// The words: what the model's events mean, in sentences. model.js records
// what happened as plain data; this module says it, in three registers: the
// event list (exact, with the numbers), the caption of a step (plain words:
// what just happened and why it matters) and the verdict of a lane at the
// end. No DOM here either, so the words are tested under Node too.

import { fmt, newer as isNewer } from './lane-state.js';

/** What a rejection's refused fence lost to: a holder's fence, or the gate's initial floor. */
const against = (r) => (r.admittedHolderId === null ? `the gate's initial floor ${r.admittedFence}` : `${r.admittedHolderId}'s ${r.admittedFence}`);

/** The event list's sentence for e, in lane mode ('naive' or 'fenced'). */
export function describe(e, mode) {
  const fenced = mode === 'fenced';
  switch (e.kind) {
    case 'model':
      return `${e.actor} calls the model (${fmt(e.ms)} ms)`;
    case 'restart':
      if (!e.persisted) return `The coordinator restarts and forgets everything: the old issuedFence (${e.issuedBefore}) was not persisted`;
      if (e.startFence === e.issuedBefore) return `The coordinator restarts; its successor gets startFence = ${e.startFence} (the old issuedFence)`;
      return `The coordinator restarts; its successor gets startFence = ${e.startFence} (the old issuedFence was ${e.issuedBefore})`;
    case 'send':
      return `${e.actor} ${e.again ? 'resends' : 'sends'} ${e.what} ${e.req}${e.again ? ' (same request id, same sentAt)' : ''}, stamped sentAt = ${fmt(e.sentAt)}`;
    case 'grant':
      return `The coordinator grants ${e.req} to ${e.holder}: fence ${e.fence}, until ${fmt(e.until)} on its clock${e.reassignedFrom ? `; reassigned from ${e.reassignedFrom}` : ''}`;
    case 'extend':
      return `The coordinator renews ${e.holder}'s lease from its own reading: fence ${e.fence} now ends at ${fmt(e.until)}`;
    case 'replay':
      return `The coordinator has seen ${e.req} before and answers with the same grant: fence ${e.fence} (issuedFence still ${e.issuedFence})`;
    case 'refuse-renewal':
      return `The coordinator refuses renewal ${e.req}: reason "expired" (an expired lease is never extended)`;
    case 'deny':
      return `The coordinator denies ${e.req}: held by ${e.heldBy}, free in ${fmt(e.retryAfter)} ms`;
    case 'lost':
      return `The reply to ${e.req} is lost on its way to ${e.actor}`;
    case 'reply':
      return `${e.actor} receives the answer to ${e.req}`;
    case 'admit':
      if (!fenced) return `The naive resource has no gate: there is nothing to push ${e.holder}'s grant to`;
      return e.pushed
        ? `The coordinator pushes ${e.holder}'s fence ${e.fence} to the gate (gate.admit): floor now ${e.floor}`
        : `The gate refuses the pushed fence ${e.fence}: it is below its floor`;
    case 'give-up':
      if (e.what === 'live') return `${e.actor} stops: ${e.error}`;
      return e.what === 'renewal' ? `${e.actor} has no lease to renew` : `${e.actor} gives up acquiring`;
    case 'timeout':
      return `${e.actor} has had no answer to ${e.req} after ${fmt(e.after)} ms and resends it unchanged`;
    case 'renewal-refused':
      return fenced
        ? `${e.actor} learns its lease expired; it must re-acquire (and would get a higher fence)`
        : `${e.actor} learns the renewal failed; its expiresAt stays ${fmt(e.expiresAt)}`;
    case 'lease':
      return fenced
        ? `${e.actor} holds fence ${e.fence}; deadline = sentAt ${fmt(e.sentAt)} + ttl ${fmt(e.ttl)} − skew ${fmt(e.skew)} = ${fmt(e.deadline)}`
        : `${e.actor} sets expiresAt = now + ttl = ${fmt(e.deadline)} (dated from the reply, not the send)`;
    case 'check':
      if (e.result === 'none') return `${e.actor} has no lease and does not write`;
      if (e.advisory) return `${e.actor} asks lease.hasExpired(): ${e.result === 'expired'} (advice only; the write goes through the gate either way)`;
      return e.result === 'valid'
        ? `${e.actor} checks now < expiresAt (${fmt(e.expiresAt)}): valid, so it goes ahead`
        : `${e.actor} checks now < expiresAt (${fmt(e.expiresAt)}): expired, so it stands down`;
    case 'misuse':
      return `${e.actor} calls gate.commit(token, async fn): refused with ${e.error} before fn runs (commit cannot keep a write fenced past its first await)`;
    case 'write-call':
      if (!fenced) return `${e.actor} starts an async write (a ${fmt(e.ms)} ms store call); nothing checks it`;
      return e.queued
        ? `${e.actor} calls gate.commitAsync with fence ${e.fence}: a write is still running, so it waits its turn`
        : `${e.actor} calls gate.commitAsync with fence ${e.fence}: admitted (floor now ${e.floor}); its store call takes ${fmt(e.ms)} ms`;
    case 'write-begin':
      return `${e.actor}'s turn comes: the gate checks fence ${e.fence} now and admits it (floor now ${e.floor}); its store call takes ${fmt(e.ms)} ms`;
    case 'write':
      if (!fenced) return `${e.actor}'s write lands: the resource now holds "${e.value}"${e.before !== null ? ` (it held "${e.before}")` : ''}`;
      if (e.async && e.landed) return `${e.actor}'s store call ends: its write with fence ${e.fence} lands and the resource holds "${e.value}"`;
      if (e.async) return `The gate refuses ${e.actor}'s waiting write when its turn comes: fence ${e.rejection.refusedFence} is below ${against(e.rejection)} (rejection #${e.rejection.seq})`;
      if (e.landed) return `The gate admits ${e.actor}'s write with fence ${e.fence} (floor now ${e.floor}): the resource holds "${e.value}"`;
      return `The gate refuses ${e.actor}'s write: fence ${e.rejection.refusedFence} is below ${against(e.rejection)} (rejection #${e.rejection.seq})`;
    case 'expire':
      return e.forgotten
        ? `The restarted coordinator has forgotten ${e.holder}'s lease (fence ${e.fence})`
        : `${e.holder}'s lease (fence ${e.fence}) ends on the coordinator's clock: it is free to be reassigned`;
    default:
      return `${e.actor}: ${e.kind}`;
  }
}

/** The window (from model.staleWindows) an event at t of holder key falls in, if any. */
function windowAt(lane, key, t) {
  return lane.windows.find((w) => w.holder === key && w.from <= t && t <= w.to) ?? null;
}

/**
 * The caption's words for one event: { what, why }. `what` says what just
 * happened in plain words; `why` (possibly empty) why it matters here.
 */
export function plain(e, lane) {
  const fenced = lane.mode === 'fenced';
  const k = e.actor;
  switch (e.kind) {
    case 'send':
      if (e.again) return { what: `${k} has heard nothing and resends the very same request ${e.req}`, why: 'a lost reply looks exactly like a lost request, so clients retry.' };
      return e.what === 'renewal'
        ? { what: `${k} asks the coordinator to renew its lease`, why: `the request is stamped with the send time, ${fmt(e.sentAt)}.` }
        : { what: `${k} asks the coordinator for the lease`, why: `the request is stamped with the send time, ${fmt(e.sentAt)}.` };
    case 'grant':
      if (e.reassignedFrom)
        return {
          what: `${e.reassignedFrom}'s lease is over on the coordinator's clock, so it grants the lease to ${e.holder} with fence ${e.fence}`,
          why: `from here two agents may act as holder; only fence ${e.fence} > ${e.fence - 1} tells them apart.`,
        };
      return { what: `The coordinator grants ${e.holder} the lease with fence ${e.fence}, until ${fmt(e.until)} on its own clock`, why: `fence ${e.fence} is the token ${e.holder}'s writes carry.` };
    case 'extend':
      return { what: `The coordinator renews ${e.holder}'s lease from the moment it reads the request: until ${fmt(e.until)}`, why: 'that is the only instant it can vouch for.' };
    case 'replay':
      return { what: `The coordinator recognises ${e.req} and answers with the grant it already made: fence ${e.fence}`, why: 'a fresh grant would mint a fence the holder never hears of.' };
    case 'refuse-renewal':
      return { what: `The coordinator refuses ${e.from}'s renewal: the lease already expired`, why: 'an expired lease is never extended, even when nobody else holds it.' };
    case 'deny':
      return { what: `The coordinator turns ${e.from} away: ${e.heldBy} holds the lease for ${fmt(e.retryAfter)} ms more`, why: `${e.from} will ask again then.` };
    case 'lost':
      return { what: `The reply to ${k}'s ${e.req} is lost on the way`, why: `${k} cannot tell whether its request arrived.` };
    case 'timeout':
      return { what: `${k} has had no answer for ${fmt(e.after)} ms`, why: 'it resends the same request, with the same id and send time.' };
    case 'reply':
      return { what: `The coordinator's answer reaches ${k}`, why: '' };
    case 'lease': {
      const diff = e.deadline - e.coordinatorUntil;
      if (fenced) {
        if (e.deadline <= e.sentAt)
          return { what: `${k} anchors its deadline at the send: ${fmt(e.deadline)}`, why: `the assumed skew (${fmt(e.skew)} ms) is at least the TTL, so the lease is dead on arrival.` };
        return {
          what: `${k} anchors its deadline at the send: ${fmt(e.sentAt)} + ${fmt(e.ttl)}${e.skew ? ` − ${fmt(e.skew)}` : ''} = ${fmt(e.deadline)}`,
          why: diff < 0 ? `${fmt(-diff)} ms inside the coordinator's ${fmt(e.coordinatorUntil)}: it never believes longer than the coordinator holds.` : `no later than the coordinator's ${fmt(e.coordinatorUntil)}.`,
        };
      }
      return {
        what: `${k} dates its lease from the reply: expiresAt = ${fmt(e.t)} + ${fmt(e.ttl)} = ${fmt(e.deadline)}`,
        why: diff > 0 ? `${fmt(diff)} ms past the coordinator's ${fmt(e.coordinatorUntil)}: ${k} will believe in a lease that is gone.` : `the same as the coordinator's ${fmt(e.coordinatorUntil)} only because the reply was instant.`,
      };
    }
    case 'check':
      if (e.result === 'none') return { what: `${k} has no lease and does not write`, why: '' };
      if (e.advisory) {
        return e.result === 'expired'
          ? { what: `${k} asks hasExpired(): true`, why: 'advice only here; the agent writes anyway so you see the gate decide.' }
          : { what: `${k} asks hasExpired(): false`, why: 'only advice: the lease can end before the write arrives, so the gate decides.' };
      }
      return e.result === 'valid'
        ? { what: `${k} checks now < expiresAt: valid, so it goes ahead`, why: 'nothing re-checks the lease between this check and the write.' }
        : { what: `${k} checks now < expiresAt: expired, so it stands down`, why: '' };
    case 'model':
      return { what: `${k} starts a ${fmt(e.ms)} ms model call before writing`, why: 'the lease can end while it works: this is the check-to-write gap.' };
    case 'misuse':
      return { what: `${k} first tries gate.commit with its async function: refused before it runs`, why: 'commit could check the fence only before the first await, so A switches to commitAsync.' };
    case 'write-call':
      if (!fenced) return { what: `${k} starts its write (no token): a ${fmt(e.ms)} ms store call`, why: 'nothing will check it when it lands.' };
      return e.queued
        ? { what: `${k} calls commitAsync with fence ${e.fence}: a write is still running, so it waits`, why: 'it is checked when its turn comes, not now.' }
        : { what: `The gate admits ${k}'s write with fence ${e.fence} and its ${fmt(e.ms)} ms store call starts`, why: 'later writes on this gate wait until it settles.' };
    case 'write-begin':
      return { what: `${k}'s turn: the gate checks fence ${e.fence} against floor ${e.floorBefore} and admits it`, why: e.floor > e.floorBefore ? `the floor rises to ${e.floor}: older fences are refused from now on.` : '' };
    case 'write': {
      const token = fenced ? `fence ${e.fence}` : 'no token';
      if (e.async && !fenced && e.overtaken)
        return { what: `${k}'s write (${token}), begun at ${fmt(e.began)}, lands after a newer holder's write`, why: `it awaited its store across the handover: a write that should not have landed, and nothing noticed.` };
      if (e.async && fenced && e.landed) return { what: `${k}'s store call ends: its write with fence ${e.fence} lands`, why: `it was admitted at ${fmt(e.began)}, while its lease was current, and nothing newer ran meanwhile.` };
      if (e.async && fenced)
        return { what: `${k}'s turn comes and the gate refuses its write: fence ${e.fence} < floor ${e.floorBefore}`, why: `refused and logged as rejection #${e.rejection.seq}; the stale write never runs.` };
      if (!fenced) {
        if (e.stale && e.beforeBy && e.beforeBy !== k)
          return { what: `${k}'s write (${token}) lands over ${e.beforeBy}'s`, why: `${k}'s lease ended at ${fmt(windowAt(lane, k, e.t)?.from ?? e.t)}: a write that should not have landed, and nothing noticed.` };
        if (e.stale) return { what: `${k}'s write (${token}) lands`, why: `${k}'s lease had already ended: a write that should not have landed, and nothing noticed.` };
        return { what: `${k}'s write (${token}) lands`, why: `${k} holds a current lease, but nothing checked it.` };
      }
      if (!e.landed)
        return {
          what: `The gate refuses ${k}'s write: fence ${e.fence} < floor ${e.floorBefore}`,
          why: e.stale ? `refused and logged as rejection #${e.rejection.seq}; ${e.before === null ? 'nothing was written before it' : `the resource keeps "${e.before}"`}.` : `${k}'s lease is current, but its fence is below what the gate has seen: logged as rejection #${e.rejection.seq}.`,
        };
      if (e.stale) return { what: `The gate admits ${k}'s stale write: fence ${e.fence} ≥ floor ${e.floorBefore}`, why: `the newer fence has not reached the gate yet, so it cannot refuse.` };
      return { what: `${k}'s write with fence ${e.fence} lands`, why: e.floor > e.floorBefore ? `the gate's floor rises to ${e.floor}: older fences are refused from now on.` : '' };
    }
    case 'expire':
      return e.forgotten
        ? { what: `The restarted coordinator has forgotten ${e.holder}'s lease`, why: `${e.holder} does not know and still believes it holds it.` }
        : { what: `${e.holder}'s lease (fence ${e.fence}) ends on the coordinator's clock`, why: `${e.holder} is not told; the lease is free to be reassigned.` };
    case 'restart':
      if (e.persisted && e.startFence < e.issuedBefore)
        return { what: `The coordinator restarts with startFence ${e.startFence}, below the old issuedFence (${e.issuedBefore})`, why: `it will issue fence ${e.startFence + 1} again, a fence already used.` };
      return e.persisted
        ? { what: `The coordinator restarts with startFence ${e.startFence}${e.startFence === e.issuedBefore ? ', the old issuedFence' : ` (the old issuedFence was ${e.issuedBefore})`}`, why: 'its next fence is still higher than any it issued before.' }
        : { what: `The coordinator restarts and forgets its fence counter`, why: 'it will issue fence 1 again, below fences already used.' };
    case 'admit':
      if (!fenced) return { what: `The naive resource has nothing to push ${e.holder}'s grant to`, why: '' };
      return e.pushed
        ? { what: `The coordinator pushes fence ${e.fence} to the gate: floor ${e.floor}`, why: e.fence > 1 ? `older fences are refused from now on, before ${e.holder} has written.` : '' }
        : { what: `The gate refuses the pushed fence ${e.fence}`, why: '' };
    case 'renewal-refused':
      return fenced
        ? { what: `${k} learns its lease expired`, why: 'it must re-acquire, and would get a higher fence.' }
        : { what: `${k} learns the renewal failed`, why: `but its expiresAt stays ${fmt(e.expiresAt)}.` };
    case 'give-up':
      return { what: describe(e, lane.mode), why: '' };
    default:
      return { what: describe(e, lane.mode), why: '' };
  }
}

const cap = (s) => s.charAt(0).toUpperCase() + s.slice(1);
const sentence = ({ what, why }) => (why ? `${what}. ${cap(why)}` : `${what}.`);

/**
 * The caption at position index of run: { text, events: { naive, fenced } }
 * where events are the seqs revealed by this step (to highlight). Position 0
 * invites the reader to play, with claim (the preset's story, for a page
 * that does not show it elsewhere) or a word about the faint drawing.
 */
export function captionAt(run, index, claim) {
  const pos = run.positions[index];
  const revealed = {};
  const parts = {};
  for (const mode of ['naive', 'fenced']) {
    const lane = run.lanes[mode];
    const e = index > 0 ? lane.events.find((x) => x.t === pos.t && x.rank === pos.j - 1) : undefined;
    revealed[mode] = e ? [e.seq] : [];
    parts[mode] = e ? cap(sentence(plain(e, lane))) : null;
  }
  let text;
  if (index === 0) text = `Press Play (or Step) to watch it happen, one event at a time. ${claim ?? 'The faint drawing shows where the run ends up: drag a ringed event along its row to change the scenario.'}`;
  else if (parts.naive && parts.fenced && parts.naive === parts.fenced) text = `Both lanes: ${parts.naive}`;
  else text = [parts.naive && `Naive: ${parts.naive}`, parts.fenced && `Fenced: ${parts.fenced}`].filter(Boolean).join(' ');
  return { text, events: revealed };
}

/**
 * The verdict of each lane at the end of run: { naive, fenced }, each
 * { text, tone }: one sentence, and 'bad' (a write that should not have
 * landed did), 'limit' (fencing could not help), 'good' (the gate did its
 * job) or 'neutral' (nothing went wrong this time).
 */
export function verdicts(run) {
  return { naive: naiveVerdict(run.lanes.naive), fenced: fencedVerdict(run.lanes.fenced) };
}

function naiveVerdict(lane) {
  const writes = lane.events.filter((e) => e.kind === 'write');
  const stale = writes.filter((e) => e.stale);
  const overtaken = stale.find((e) => e.overtaken);
  if (overtaken) {
    // The newer holder's write that landed while it was under way.
    const newer = writes.find((e) => e.landed && e.actor !== overtaken.actor && e.t > overtaken.began && e.seq < overtaken.seq && isNewer(lane.generations, e.gen, overtaken.gen));
    return bad(`Naive: ${overtaken.actor}'s write awaited across the handover and landed after ${newer ? `${newer.actor}'s` : 'a'} newer one, and nothing noticed.`);
  }
  if (stale.length) {
    const w = stale.at(-1);
    if (w.beforeBy && w.beforeBy !== w.actor) return bad(`Naive: ${w.actor}'s write from an expired lease overwrote ${w.beforeBy}'s, and nothing noticed.`);
    const later = writes.find((x) => x.seq > w.seq && x.actor !== w.actor);
    if (later) return bad(`Naive: ${w.actor}'s write from an expired lease landed before ${later.actor}'s, and nothing recorded it.`);
    return bad(`Naive: ${w.actor}'s write from an expired lease landed, and nothing noticed.`);
  }
  if (!writes.length) return neutral('Naive: nothing was written.');
  return neutral(`Naive: ${writes.length === 1 ? 'the write' : `all ${writes.length} writes`} came from current leases, but nothing checked them; had one been stale it would have landed too.`);
}

function fencedVerdict(lane) {
  const writes = lane.events.filter((e) => e.kind === 'write');
  const refused = writes.filter((e) => !e.landed);
  const staleLanded = writes.filter((e) => e.landed && e.stale);
  const queued = lane.events.filter((e) => e.kind === 'write-call' && e.queued);
  // A stale write the gate admitted outweighs any it refused.
  if (staleLanded.length) {
    const w = staleLanded[0];
    return limit(
      `Fenced: admitted: the stale write reached the gate first. ${w.actor}'s write (fence ${w.fence}) arrived before any write with a newer fence, so the gate could not refuse it: a fence refuses only once the newer one has reached the resource.`,
    );
  }
  if (queued.length && refused.length) {
    const r = refused[0].rejection;
    const waited = queued.filter((q) => writes.some((w) => w.wid === q.wid && w.landed)).map((q) => q.actor);
    return good(
      `Fenced: commitAsync ran the writes one at a time${waited.length ? `: ${waited.join(' and ')}'s write waited for the one in flight and landed after it` : ''}; ` +
        `${refused[0].actor}'s stale write was checked when its turn came and refused (fence ${r.refusedFence} < floor ${r.admittedFence}, rejection #${r.seq}).`,
    );
  }
  if (refused.length) {
    const w = refused[0];
    const r = w.rejection;
    if (!w.stale) {
      if (r.admittedHolderId === null) {
        return limit(`Fenced: ${w.actor}'s current lease (fence ${w.fence}) was refused and logged: the gate's initial floor (${r.admittedFence}) is above the fences this coordinator issued.`);
      }
      const restart = lane.events.find((e) => e.kind === 'restart');
      if (restart?.persisted) {
        return limit(
          `Fenced: the restarted coordinator's startFence (${restart.startFence}) was below the old issuedFence (${restart.issuedBefore}), so it issued fence ${w.fence} again, below the floor ${w.floorBefore}, and ${w.actor}'s current lease was refused and logged.`,
        );
      }
      if (restart) {
        return limit(`Fenced: the restarted coordinator issued fence ${w.fence} again, below the floor ${w.floorBefore}, so ${w.actor}'s current lease was refused and logged; persist issuedFence (startFence) to avoid it.`);
      }
      return limit(`Fenced: ${w.actor}'s current lease (fence ${w.fence}) was refused and logged: the gate had already admitted fence ${r.admittedFence}.`);
    }
    const kept = w.before === null ? 'before anything was written' : `; the resource keeps "${w.before}"`;
    return good(`Fenced: fence ${r.refusedFence} < floor ${r.admittedFence}, refused and logged (rejection #${r.seq})${w.before === null ? ` ${kept}` : kept}.`);
  }
  if (!writes.length) return neutral('Fenced: nothing was written.');
  return good(`Fenced: every write carried the highest fence so far (${writes.map((w) => w.fence).join(', ')}) and landed; there was nothing to refuse.`);
}

const bad = (text) => ({ text, tone: 'bad' });
const good = (text) => ({ text, tone: 'good' });
const limit = (text) => ({ text, tone: 'limit' });
const neutral = (text) => ({ text, tone: 'neutral' });

/** Warnings about the scenario itself (shown above the lanes). */
export function warnings(scenario) {
  const out = [];
  if (scenario.skew >= scenario.ttl) {
    out.push(
      `The assumed clock skew (${fmt(scenario.skew)} ms) is at least the TTL (${fmt(scenario.ttl)} ms): every fenced deadline falls at or before its own send, so each fenced lease is expired on arrival.`,
    );
  }
  return out;
}

/** What an edit's handle moves, in words: "A's write", "B's start", ... */
export function editedWhat(e) {
  switch (e.kind) {
    case 'check':
      return `${e.actor}'s check`;
    case 'write':
    case 'write-call':
      return `${e.actor}'s write`;
    case 'send':
      return `${e.actor}'s start`;
    case 'reply':
      return `the reply to ${e.actor}`;
    case 'lost':
      return `the lost reply to ${e.actor}`;
    case 'grant':
    case 'deny':
    case 'extend':
    case 'replay':
    case 'refuse-renewal':
      return `${e.from}'s request at the coordinator`;
    case 'expire':
      return `the end of ${e.holder}'s lease (fence ${e.fence})`;
    case 'restart':
      return 'the coordinator restart';
    default:
      return `${e.actor}'s ${e.kind}`;
  }
}

/**
 * The caption after an edit: what moved where, what the moved event does
 * now in each lane (its caption sentence: what and why), and each verdict
 * that changed. run is the new run, before the previous one; edit is
 * { key, label, value, actor, kind, occurrence } (the moved event's actor,
 * kind and its place among the lane's events of that actor, kind and key).
 */
export function editCaption(run, before, edit) {
  const parts = [];
  const here = (lane) => lane.events.filter((e) => e.edit?.key === edit.key && e.actor === edit.actor && e.kind === edit.kind)[edit.occurrence];
  const moved = here(run.lanes.fenced) ?? here(run.lanes.naive);
  parts.push(moved ? `${cap(editedWhat(moved))} now at ${fmt(moved.t)} ms (${edit.label}: ${fmt(edit.value)}).` : `${edit.label}: ${fmt(edit.value)}.`);
  const said = {};
  for (const mode of ['naive', 'fenced']) {
    const e = here(run.lanes[mode]);
    said[mode] = e ? sentence(plain(e, run.lanes[mode])) : null;
  }
  if (said.naive && said.naive === said.fenced) parts.push(`Both lanes: ${cap(said.naive)}`);
  else for (const mode of ['naive', 'fenced']) if (said[mode]) parts.push(`${mode === 'naive' ? 'Naive' : 'Fenced'}: ${cap(said[mode])}`);
  const now = verdicts(run);
  const was = before ? verdicts(before) : null;
  const changed = ['naive', 'fenced'].filter((m) => was && was[m].text !== now[m].text);
  if (changed.length) parts.push(`Verdict${changed.length > 1 ? 's' : ''} changed: ${changed.map((m) => now[m].text).join(' ')}`);
  return parts.join(' ');
}
