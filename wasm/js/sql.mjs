// lease-fence/sql: the fence gate inside PostgreSQL, from JavaScript. The
// fence check, the raise of the floor and the caller's statements are one
// transaction, so a stale holder's write can never commit, whatever process
// or machine it runs in. The tables and their meaning are those of Go's
// gates/sqlfence: Go and JavaScript writers on one database share one floor
// and one rejections log.
//
// It takes a pool (a pg.Pool, or anything whose connect() resolves to a
// client with query(text, values) and release(err)); it does not import pg.
import { InvalidArgumentError, isStaleFence } from './errors.mjs';
import { SQL } from './gate-texts.mjs';
import {
  checkId, checkSignal, checkToken, FenceStoreError, MAX_REJECTIONS_PAGE, OutcomeUnknownError, pageOptions, rejection, signalOf, staleError,
} from './gate-common.mjs';

export { FenceStoreError, isStaleFence, MAX_REJECTIONS_PAGE, OutcomeUnknownError };

/** How many times a transaction runs when PostgreSQL reports 40001 or 40P01. */
export const MAX_ATTEMPTS = 8;

const TABLE = /^[A-Za-z_][A-Za-z0-9_]{0,40}$/;
// The rejection table's columns that earlier versions named otherwise.
const RENAMED_COLUMNS = [['refused_holder', 'refused_holder_id'], ['admitted_holder', 'admitted_holder_id']];

// The tokens of gates/sqlfence/statements.sql and their PostgreSQL values
// (the tests' deliberate breaks are Go's alone).
const TOKENS = { '{greatest}': 'GREATEST', '{xid}': ', pg_current_xact_id()::text AS xid', '{inserted}': '?', '{raised}': 'excluded.fence', '{cmp}': '=' };

// statement is the PostgreSQL text of the statement called name over the
// tables floor and rej, as Go's sqlfence makes it: its tokens replaced
// (more: further token, value pairs), then its ? placeholders numbered
// $1, $2, ...
function statement(name, floor, rej, ...more) {
  const values = { ...TOKENS, '{floor}': floor, '{rejection}': rej };
  for (let i = 0; i < more.length; i += 2) values[more[i]] = more[i + 1];
  let n = 0;
  return SQL[name].replace(/\{[a-z]+\}/g, (t) => values[t] ?? t).replace(/\?/g, () => `$${++n}`);
}

/**
 * Opens the gate on pool, creating its two tables (<table>_floor and
 * <table>_rejection) if they are missing.
 */
export async function openSqlFence(pool, options) {
  if (typeof pool !== 'object' || pool === null || typeof pool.connect !== 'function') {
    throw new InvalidArgumentError('lease-fence/sql: pool must have a connect() method (a pg.Pool)', 'pool');
  }
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new InvalidArgumentError('lease-fence/sql: options must be an object such as { dialect, table, exclusive }', 'options');
  }
  const { dialect = 'postgres', table = 'lease_fence', exclusive = false } = options ?? {};
  if (dialect !== 'postgres') {
    throw new InvalidArgumentError(`lease-fence/sql: options.dialect must be 'postgres', got ${JSON.stringify(dialect)}`, 'options.dialect');
  }
  if (typeof table !== 'string' || !TABLE.test(table)) {
    throw new InvalidArgumentError('lease-fence/sql: options.table must be a letter or underscore followed by up to 40 letters, digits or underscores', 'options.table');
  }
  if (typeof exclusive !== 'boolean') {
    throw new InvalidArgumentError(`lease-fence/sql: options.exclusive must be a boolean, got ${typeof exclusive}`, 'options.exclusive');
  }
  const store = new SqlFence(pool, table, exclusive);
  await store._createTables();
  return store;
}

// literal is s as a PostgreSQL string constant, as pg's escapeLiteral
// writes it: its quotes doubled, and with a backslash, its backslashes
// doubled too inside an E'...' constant, so it means s whatever
// standard_conforming_strings is (the client's encoding is UTF-8, in which
// no character's bytes hold a quote or a backslash).
const literal = (s) => (s.includes('\\') ? ` E'${s.replace(/[\\']/g, '$&$&')}'` : `'${s.replace(/'/g, "''")}'`);

const sqlState = (err) => (err && typeof err.code === 'string' && /^[0-9A-Z]{5}$/.test(err.code) ? err.code : '');
// The server ended the connection without finishing the transaction: it
// is shutting down or restarting (57P01, 57P02, 57P03), an idle session
// ended (57P05), a connection exception (class 08).
const connectionEnded = (code) => ['57P01', '57P02', '57P03', '57P05'].includes(code) || code.startsWith('08');
// A conflict a fresh transaction may not meet, or a connection that ended
// before COMMIT was sent (the server rolled the transaction back). A
// COMMIT that failed otherwise is settled by #commit and reported as it is.
const transient = (err) => {
  if (err instanceof BrokenBeforeCommit) return true;
  const cause = err instanceof FenceStoreError ? err.cause : err;
  const code = sqlState(cause);
  if (code === '40001' || code === '40P01') return true;
  return connectionEnded(code) && !(err instanceof FenceStoreError && err.op === 'commit');
};
// BrokenBeforeCommit carries an error met on a connection that broke before
// the transaction's COMMIT was sent: nothing of it happened, so it may run
// again. #retry throws err itself once it gives up.
class BrokenBeforeCommit {
  constructor(err) { this.err = err; }
}
const pause = (i) => new Promise((resolve) => {
  const d = 2 ** Math.min(i, 6);
  setTimeout(resolve, d / 2 + Math.random() * d);
});

/** A fence gate kept in a PostgreSQL database. Made by openSqlFence. */
class SqlFence {
  #pool;
  #q;
  #prepared = new WeakSet(); // the pool's clients that have the share statement
  #unprepared = false; // the pool's connections do not keep it (#beginShare)

  constructor(pool, table, exclusive) {
    this.#pool = pool;
    const floor = `${table}_floor`;
    const rej = `${table}_rejection`;
    // The statements are Go's sqlfence's, from their one source,
    // gates/sqlfence/statements.sql, with its tokens replaced as Go replaces
    // them for PostgreSQL (see statement below). Their meaning is said in
    // gates/sqlfence/sqlfence.go.
    const q = (name, ...more) => statement(name, floor, rej, ...more);
    const share = exclusive ? null : q('share');
    this.#q = {
      schema: [q('floor_table'), q('rejection_table')],
      upsert: q('upsert'),
      // Shared admission (null with exclusive): a fence equal to the floor
      // takes the resource's advisory lock, then the floor row, in share
      // mode, and changes nothing; any other write (no row back) takes the
      // advisory lock for itself (raiseLock), unless the share statement
      // took it already, before the upsert.
      share,
      // The share statement prepared on a connection under this name (in
      // the session: PREPARE, then EXECUTE in later transactions; see
      // #beginShare).
      prepareShare: share && `PREPARE lease_fence_${table}_share AS ${share};\n`,
      shareName: `lease_fence_${table}_share`,
      raiseLock: q('raise_lock'),
      log: q('log_rejection'),
      floor: q('floor'),
      rejections: q('rejections'),
      rejectionsAfter: q('rejections_after'),
      status: q('status'),
      // Tables made by an earlier version name two rejection columns
      // otherwise; opening renames them, as Go's sqlfence does.
      hasColumn: q('has_column_postgres'),
      renames: RENAMED_COLUMNS.map(([from, to]) => [rej, from, to, q('rename_column', '{from}', from, '{to}', to)]),
    };
  }

  async _createTables() {
    for (const q of this.#q.schema) {
      try {
        await this.#retry(() => this.#query('creating tables', q, []));
      } catch (err) {
        // Two openers raced to create the table; it exists now.
        if (sqlState(err.cause) !== '23505') throw err instanceof BrokenBeforeCommit ? err.err : err;
      }
    }
    const has = async (table, column) => {
      const { rows } = await this.#retry(() => this.#query('upgrading tables', this.#q.hasColumn, [table, column]));
      return (rows[0]?.n ?? 0) > 0;
    };
    for (const [table, from, to, rename] of this.#q.renames) {
      if (!(await has(table, from))) continue;
      try {
        await this.#retry(() => this.#query('upgrading tables', rename, []));
      } catch (err) {
        // Another opener renamed it first.
        if (!(await has(table, to))) throw err;
      }
    }
  }

  /**
   * Runs write(client) in one transaction with the fence check and the raise
   * of the floor, and resolves with what write resolved with. A token below
   * the floor rejects with StaleFenceError (write did not run; the refusal
   * is committed). If write throws, everything rolls back, the raise of the
   * floor included, and its error rejects the promise. Serialization
   * failures and deadlocks restart the transaction (write may run again).
   * options.signal (an AbortSignal) gives up before write runs: an aborted
   * signal rejects with signal.reason at once, or once the connection and
   * the floor row's lock are had (the wait itself is not interrupted), and
   * then nothing was written or logged.
   */
  async commit(token, write, options) {
    checkToken(token);
    if (typeof write !== 'function') {
      throw new InvalidArgumentError(`lease-fence: write must be a function, got ${write === null ? 'null' : typeof write}`, 'write');
    }
    const signal = signalOf(options, 'lease-fence/sql: commit');
    checkSignal(signal);
    return this.#run(token, write, signal);
  }

  /**
   * Raises the floor of token's resource to token.fence without writing, in
   * its own transaction. A token below the floor is refused and logged.
   */
  async admit(token, options) {
    checkToken(token);
    const signal = signalOf(options, 'lease-fence/sql: admit');
    checkSignal(signal);
    await this.#run(token, null, signal);
  }

  /** The highest fence admitted for resource (0 if none has been). */
  async floor(resource) {
    checkId(resource, 'resource');
    const { rows } = await this.#retry(() => this.#query('reading the floor', this.#q.floor, [resource]));
    return rows.length === 0 ? 0 : Number(rows[0].fence);
  }

  /**
   * Every refusal logged for resource, oldest first, as FenceGate's
   * rejections. With options { afterSeq, limit }: a page, those whose seq is
   * above afterSeq (default 0), at most limit (1 to MAX_REJECTIONS_PAGE);
   * pass the last seq of a page as afterSeq for the next, until a page is
   * shorter than limit.
   */
  async rejections(resource, options) {
    checkId(resource, 'resource');
    const page = pageOptions(options, 'lease-fence/sql: rejections');
    const [q, args] = page ? [this.#q.rejectionsAfter, [resource, page.afterSeq, page.limit]] : [this.#q.rejections, [resource]];
    const { rows } = await this.#retry(() => this.#query('reading rejections', q, args));
    return rows.map((r) => rejection(r.seq, resource, r.refused_holder_id, r.refused_fence, r.admitted_holder_id, r.admitted_fence));
  }

  // #query runs one statement on the pool; a connection that broke (a
  // restarted server's old connections) is tried again by the callers'
  // #retry, as nothing of a lone statement happened without an answer.
  async #query(op, text, values) {
    try {
      return await this.#pool.query(text, values);
    } catch (err) {
      const e = new FenceStoreError(`lease-fence/sql: ${op}: ${err?.message ?? err}`, { op, cause: err });
      throw sqlState(err) ? e : new BrokenBeforeCommit(e);
    }
  }

  async #retry(fn, signal) {
    for (let i = 0; ; i++) {
      checkSignal(signal);
      try {
        return await fn();
      } catch (err) {
        const plain = err instanceof BrokenBeforeCommit ? err.err : err;
        if (i + 1 >= MAX_ATTEMPTS || !transient(err)) throw plain;
        await pause(i);
      }
    }
  }

  async #run(token, write, signal) {
    return this.#retry(() => this.#attempt(token, write, signal), signal);
  }

  // One transaction: check and raise (or count a refusal) in one statement
  // that locks the floor row, then either log the refusal or write, and
  // commit. A fence equal to the floor is first tried with the share
  // statement (not with exclusive).
  async #attempt(token, write, signal) {
    let client;
    try {
      client = await this.#pool.connect();
    } catch (err) {
      const e = new FenceStoreError(`lease-fence/sql: connecting: ${err?.message ?? err}`, { op: 'connecting', cause: err });
      throw sqlState(err) ? e : new BrokenBeforeCommit(e);
    }
    if (signal?.aborted) {
      client.release();
      throw signal.reason;
    }
    let broken;
    let ended = false; // COMMIT was sent: it ends the transaction either way
    // A connection that breaks while the client is checked out emits
    // 'error' on it; unheard, that would crash the process.
    const onError = (err) => { broken ??= err; };
    client.on?.('error', onError);
    const step = async (op, text, values) => {
      try {
        return await client.query(text, values);
      } catch (err) {
        if (!sqlState(err)) broken = err; // no answer: the connection is gone
        throw new FenceStoreError(`lease-fence/sql: ${op}: ${err?.message ?? err}`, { op, cause: err });
      }
    };
    try {
      try {
        // BEGIN and the share statement go as one query (#beginShare). A
        // resource that cannot be written into a query's text (one with a
        // NUL character) sends the statement as a parameter, behind BEGIN without waiting for BEGIN's answer: a pg client in
        // pipeline mode ({ pipeline: true }) sends both at once; should
        // BEGIN fail, the statement only reads and takes locks that end
        // with it, and BEGIN's error is what is thrown.
        let row;
        if (this.#q.share !== null) {
          const got = token.resource.includes('\0') ? null : await this.#beginShare(client, step, token);
          if (got !== null) {
            row = got.row;
          } else {
            const begin = step('begin', 'BEGIN', []);
            const share = step('checking the floor', this.#q.share, [token.resource, token.fence]);
            share.catch(() => {}); // awaited below, unless BEGIN failed
            await begin;
            [row] = (await share).rows;
          }
          if (row === undefined) await step('checking the floor', this.#q.raiseLock, [token.resource]);
        } else {
          await step('begin', 'BEGIN', []);
        }
        row ??= (await step('checking the floor', this.#q.upsert, [token.resource, token.fence, token.holderId])).rows[0];
        checkSignal(signal); // gave up while waiting for the lock: roll back
        const floor = Number(row.fence);
        if (token.fence < floor) {
          const r = rejection(Number(row.rejections), token.resource, token.holderId, token.fence, row.holder, floor);
          await step('logging the refusal', this.#q.log, [token.resource, r.seq, token.holderId, token.fence, row.holder, floor]);
          ended = true;
          await this.#commit(step, row.xid);
          throw staleError(r);
        }
        const result = write === null ? undefined : await write(client);
        ended = true;
        await this.#commit(step, row.xid);
        return result;
      } catch (err) {
        if (!broken && !ended) await client.query('ROLLBACK').catch((e) => { broken = e; });
        if (broken && !ended) throw new BrokenBeforeCommit(err); // the server rolled it back
        throw err;
      }
    } finally {
      if (!broken) client.off?.('error', onError);
      client.release(broken);
    }
  }

  // #beginShare begins the transaction and runs the share statement in
  // one query of the simple protocol (one message each way, its results
  // an array), the statement prepared on the connection: the server then
  // neither parses nor plans it again for each commit. The statement is
  // prepared (PREPARE, before BEGIN in the same query) on the first commit
  // a client of the pool carries; the resource and the fence are written
  // into the EXECUTE (literal above). Should PREPARE or BEGIN fail, what
  // follows does not run. A statement the connection already has (another
  // store on it, a client seen under another object) or lost (DEALLOCATE,
  // DISCARD) is executed or prepared again on the same connection; should
  // that fail the same way (a pooler that hands each transaction another
  // server connection), it gives null from then on, and the caller sends
  // the statement with parameters. Resolves with { row }, the share statement's row if
  // any.
  async #beginShare(client, step, token) {
    if (this.#unprepared) return null;
    const execute = `BEGIN;\nEXECUTE ${this.#q.shareName}(${literal(token.resource)}, ${token.fence})`;
    let prepare = !this.#prepared.has(client);
    for (let i = 0; i < 2; i++) {
      try {
        const res = await step('checking the floor', prepare ? this.#q.prepareShare + execute : execute);
        this.#prepared.add(client);
        return { row: (Array.isArray(res) ? res[res.length - 1] : res).rows[0] };
      } catch (err) {
        const code = sqlState(err.cause);
        if (code !== '42P05' && code !== '26000') throw err;
        await step('checking the floor', 'ROLLBACK'); // 26000: BEGIN had run
        prepare = code === '26000';
      }
    }
    this.#unprepared = true;
    return null;
  }

  // #commit commits; a COMMIT that failed without an answer from the server
  // (the connection broke) may or may not have happened, so the server is
  // asked for the transaction's status on another connection.
  async #commit(step, xid) {
    try {
      await step('commit', 'COMMIT', []);
      return;
    } catch (err) {
      // The server answered: rolled back; unless with a FATAL that ends
      // the connection, which may come after the commit happened.
      const code = sqlState(err.cause);
      if (code && !connectionEnded(code)) throw err;
      for (let i = 0; i < MAX_ATTEMPTS; i++) {
        try {
          const { rows: [{ status }] } = await this.#pool.query(this.#q.status, [xid]);
          if (status === 'committed') return;
          if (status === 'aborted') throw err;
        } catch (e) {
          if (e === err) throw err;
        }
        await pause(i);
      }
      throw new OutcomeUnknownError(`lease-fence/sql: the commit's outcome is unknown: ${err.cause?.message ?? err.message}`, { cause: err.cause });
    }
  }
}
