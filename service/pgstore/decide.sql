-- lease-fence: the coordinator's server-side decision on PostgreSQL
-- (service/pgstore), the one source of its text. Go embeds this file
-- (fast.go, batch.go); schema version 5 creates lease_fence_decide (and an
-- upgrade from version 4 does), version 6 lease_fence_decide_each (and an
-- upgrade from version 5 does); versions 7 and 8 replace
-- lease_fence_decide (and upgrades from 6 and 7 do; testdata holds the
-- texts of versions 6 and 7).
--
-- Each statement follows a line "-- name: NAME" and runs to the next such
-- line; comment lines before it are not part of it. Tokens replaced:
--   {clock}   the database server's clock in whole Unix milliseconds plus
--             the offset $2 (zero but in the tests, which step the clock
--             through it); {clock_p} the same plus p_offset
--   {slots}   how many rows the counts are spread over (countSlots)

-- name: read
-- The state one decision starts from, read without a lock (no write, no
-- commit to wait for): the row of $1 with its version (the xmin of the
-- row's tuple, 0: no row), the clock, the fence counter, the counts,
-- max_connections and whether some coordinator listens.
SELECT coalesce(l.xmin::text::bigint, 0), l.holder_id, l.request_id, l.fence, l.expires_at, l.secret_sha256, l.releases, l.last_fence,
	l.decided_at, l.owner, l.value, l.revoked_holder, l.revoked_fence, l.revoked_at,
	c.now, s.last_value, s.is_called, k.leases, k.releases, k.lasts, current_setting('max_connections')::bigint,
	m.listening_until > (extract(epoch FROM clock_timestamp()) * 1000)::float8
	FROM (SELECT {clock} AS now) c CROSS JOIN lease_fence_fences s CROSS JOIN lease_fence_meta m
	CROSS JOIN (SELECT coalesce(sum(leases), 0)::bigint AS leases, coalesce(sum(releases), 0)::bigint AS releases,
		coalesce(sum(lasts), 0)::bigint AS lasts FROM lease_fence_totals) k
	LEFT JOIN lease_fence_leases l ON l.resource = $1

-- name: decide
-- A decision made in Go on the state of version p_version (0: no row)
-- at the reading p_now, written and committed in one statement, the
-- statement's own transaction. The decision takes effect at the reading
-- o_reading: the server's clock (never below the row's decided_at), which
-- is not below p_now; the instants of the decision that are p_now's (a
-- lease's expiry, a new release's or revocation's time: p_shift_expires,
-- p_rel_pos with p_rel_at, p_shift_rat) move with it, so a decision is
-- dated while its statement runs. It raises SQLSTATE LF000 (and so writes
-- nothing) when that state is no longer the row's, or when the decision's
-- premises no longer hold:
--   - the row is another version (another decision or a sweep wrote it);
--   - p_now is ahead of the reading, or the reading has reached p_until,
--     the first reading at which the decision could differ (the expiry of
--     the lease record, the end of a release's or a revocation's memory);
--   - a decision that adds a lease record does not get the counts' lock
--     shared, or finds the count less than max_connections from p_max_leases
--     (the two-round-trip path decides those, exactly); one that adds a
--     release or a last fence finds its count at its bound.
-- p_write: 0 writes nothing (the row is locked all the same, and the
-- commit does not wait for the disk), 1 writes the row, 2 deletes it. With p_grant, the row's fence is taken from
-- the sequence (o_fence; the decision was made with p_fence, the fence
-- after the counter it read). The counts change by p_dl, p_dr, p_dk, the
-- owners' counts by p_deltas (in the owners' order, as every writer takes
-- them). It returns the row's new version, the fence, the server's clock,
-- the reading, the counter, the counts and whether some coordinator
-- listens. The counts are summed only for a decision that adds to one (p_dl,
-- p_dr or p_dk above 0), the only one whose premises they are: the others
-- answer -1 for each (not read).
CREATE OR REPLACE FUNCTION lease_fence_decide(
	p_resource text, p_version bigint, p_now float8, p_offset float8, p_until float8, p_write integer, p_grant boolean,
	p_holder text, p_request text, p_fence bigint, p_expires float8, p_secret bytea, p_releases bytea, p_last bigint,
	p_sweep float8, p_owner text, p_value text, p_rholder text, p_rfence bigint, p_rat float8,
	p_dl bigint, p_dr bigint, p_dk bigint, p_owners text[], p_deltas bigint[],
	p_max_leases bigint, p_max_releases bigint, p_max_lasts bigint, p_count_key bigint,
	p_shift_expires boolean, p_shift_rat boolean, p_rel_pos integer[], p_rel_at float8[],
	OUT o_version bigint, OUT o_fence bigint, OUT o_now float8, OUT o_reading float8, OUT o_issued bigint,
	OUT o_leases bigint, OUT o_releases bigint, OUT o_lasts bigint, OUT o_listening boolean)
LANGUAGE plpgsql AS $$
-- Its statements are few (each costs an executor's start and end, and
-- each scan of a table a system call for its size): a decision that
-- writes the row runs two, the row's lock (with the sum of the counts when
-- it adds to one: that sum over their rows costs more than the rest of the
-- statement), then its write with the counts' change and the listening
-- mark (read once the row is locked); one that writes nothing, the lock and
-- the mark. What needs no table (the clock, the sequence's value) is an
-- expression, not a statement.
DECLARE
	v bigint;
	decided float8;
	shift float8;
	rel bytea := p_releases;
	i integer;
	ignored text;
	counted boolean := p_dl > 0 OR p_dr > 0 OR p_dk > 0;
BEGIN
	IF p_dl > 0 AND NOT pg_try_advisory_xact_lock_shared(p_count_key) THEN
		RAISE EXCEPTION 'lease_fence_decide: the counts are locked' USING ERRCODE = 'LF000';
	END IF;
	IF p_write = 0 THEN
		-- Nothing to make durable: the row's lock (and a placeholder's
		-- insert) need no wait for the disk.
		ignored := set_config('synchronous_commit', 'off', true);
	END IF;
	-- The row is locked even for a decision that writes nothing, so that
	-- one made at a reading after that of a decision still in flight on the
	-- row waits for it (and then finds the row changed). The counts, if the
	-- decision adds to one, are read in the same statement.
	IF p_version = 0 THEN
		INSERT INTO lease_fence_leases (resource, decided_at, sweep_at) VALUES (p_resource, 0, 0) ON CONFLICT (resource) DO NOTHING;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'lease_fence_decide: the row was made' USING ERRCODE = 'LF000';
		END IF;
		v := 0;
		decided := 0;
		IF counted THEN
			SELECT coalesce(sum(leases), 0)::bigint, coalesce(sum(releases), 0)::bigint, coalesce(sum(lasts), 0)::bigint
				INTO o_leases, o_releases, o_lasts FROM lease_fence_totals;
		END IF;
	ELSIF NOT counted THEN
		SELECT xmin::text::bigint, decided_at INTO v, decided FROM lease_fence_leases WHERE resource = p_resource FOR UPDATE;
	ELSE
		SELECT l.v, l.decided_at, k.leases, k.releases, k.lasts INTO v, decided, o_leases, o_releases, o_lasts
			FROM (SELECT xmin::text::bigint AS v, decided_at FROM lease_fence_leases WHERE resource = p_resource FOR UPDATE) l
			CROSS JOIN (SELECT coalesce(sum(leases), 0)::bigint AS leases, coalesce(sum(releases), 0)::bigint AS releases,
				coalesce(sum(lasts), 0)::bigint AS lasts FROM lease_fence_totals) k;
	END IF;
	IF v IS DISTINCT FROM p_version THEN
		RAISE EXCEPTION 'lease_fence_decide: the row changed' USING ERRCODE = 'LF000';
	END IF;
	IF (p_dl > 0 AND o_leases >= p_max_leases - current_setting('max_connections')::bigint)
		OR (p_dr > 0 AND o_releases >= p_max_releases) OR (p_dk > 0 AND o_lasts >= p_max_lasts) THEN
		RAISE EXCEPTION 'lease_fence_decide: a count is near its bound' USING ERRCODE = 'LF000';
	END IF;
	-- The clock, read once the row is locked.
	o_now := {clock_p};
	o_reading := greatest(o_now, decided);
	IF p_now > o_reading OR o_reading >= p_until THEN
		RAISE EXCEPTION 'lease_fence_decide: the decision does not hold at the reading' USING ERRCODE = 'LF000';
	END IF;
	shift := o_reading - p_now;
	FOR i IN 1 .. coalesce(array_length(p_rel_pos, 1), 0) LOOP
		rel := overlay(rel PLACING float8send(p_rel_at[i] + shift) FROM p_rel_pos[i] FOR 8);
	END LOOP;
	o_fence := p_fence;
	IF p_grant THEN
		o_fence := nextval('lease_fence_fences');
	END IF;
	-- The counter: the sequence's last value (null before its first), read
	-- without a scan.
	o_issued := coalesce(pg_sequence_last_value('lease_fence_fences'), 0);
	-- The write, the counts' change (in this backend's row of them) and
	-- the listening mark, read once the row is locked, in one statement.
	IF p_write = 1 THEN
		WITH w AS (UPDATE lease_fence_leases SET holder_id = p_holder, request_id = p_request, fence = o_fence,
				expires_at = p_expires + CASE WHEN p_shift_expires THEN shift ELSE 0 END, secret_sha256 = p_secret, releases = rel,
				decided_at = o_reading, sweep_at = p_sweep, last_fence = p_last, owner = p_owner, value = p_value,
				revoked_holder = p_rholder, revoked_fence = p_rfence, revoked_at = p_rat + CASE WHEN p_shift_rat THEN shift ELSE 0 END
				WHERE resource = p_resource RETURNING xmin::text::bigint AS v),
			c AS (UPDATE lease_fence_totals SET leases = leases + p_dl, releases = releases + p_dr, lasts = lasts + p_dk
				WHERE slot = pg_backend_pid() % {slots} AND (p_dl <> 0 OR p_dr <> 0 OR p_dk <> 0))
		SELECT w.v, m.listening_until > (extract(epoch FROM clock_timestamp()) * 1000)::float8 INTO o_version, o_listening
			FROM w CROSS JOIN lease_fence_meta m;
	ELSIF p_write = 2 OR p_version = 0 THEN
		-- A deletion, or the placeholder of a decision that writes nothing.
		WITH w AS (DELETE FROM lease_fence_leases WHERE resource = p_resource),
			c AS (UPDATE lease_fence_totals SET leases = leases + p_dl, releases = releases + p_dr, lasts = lasts + p_dk
				WHERE slot = pg_backend_pid() % {slots} AND (p_dl <> 0 OR p_dr <> 0 OR p_dk <> 0))
		SELECT m.listening_until > (extract(epoch FROM clock_timestamp()) * 1000)::float8 INTO o_listening FROM lease_fence_meta m;
		o_version := 0;
	ELSE
		o_version := p_version;
		SELECT m.listening_until > (extract(epoch FROM clock_timestamp()) * 1000)::float8 INTO o_listening FROM lease_fence_meta m;
	END IF;
	IF counted THEN
		o_leases := o_leases + p_dl;
		o_releases := o_releases + p_dr;
		o_lasts := o_lasts + p_dk;
	ELSE
		o_leases := -1;
		o_releases := -1;
		o_lasts := -1;
	END IF;
	FOR i IN 1 .. coalesce(array_length(p_owners, 1), 0) LOOP
		INSERT INTO lease_fence_owners AS o (owner, slot, leases) VALUES (p_owners[i],
			coalesce((SELECT slot FROM lease_fence_owners WHERE owner = p_owners[i] ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED),
				floor(random() * {slots})::integer), p_deltas[i])
			ON CONFLICT (owner, slot) DO UPDATE SET leases = o.leases + excluded.leases;
	END LOOP;
END
$$

-- name: call
-- The call, its answer one value (a record of the OUT parameters): a
-- function called in the select list runs without the function scan (and
-- its tuple store) that a call in FROM costs.
SELECT lease_fence_decide($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
		$21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33)

-- name: decide_each
-- The decisions of several resources (a batch of renewals) in one
-- statement, one transaction and one commit: for each i, lease_fence_decide
-- with the i-th element of each array, in a subtransaction of its own, so
-- that one that raises (LF000: its row changed, a premise no longer holds;
-- or any other error, a lock_timeout) writes nothing and leaves the others
-- as they are. Each is a decision that takes no fence and changes no count
-- (p_grant false, no counts' or owners' change, no release dated at the
-- reading); the caller sends the resources in byte order, so that two
-- batches lock their rows in the same order. It returns one row per
-- decision, in their order: o_state '' and lease_fence_decide's answer, or
-- the SQLSTATE it raised. A decision that writes nothing turns
-- synchronous_commit off for the transaction: if any decision wrote, the
-- setting is put back, and the commit waits for the disk (and the
-- standbys).
CREATE OR REPLACE FUNCTION lease_fence_decide_each(
	p_resources text[], p_versions bigint[], p_nows float8[], p_offset float8, p_untils float8[], p_writes integer[],
	p_holders text[], p_requests text[], p_fences bigint[], p_expires float8[], p_secrets bytea[], p_releases bytea[], p_lasts bigint[],
	p_sweeps float8[], p_owner text[], p_values text[], p_rholders text[], p_rfences bigint[], p_rats float8[],
	p_max_leases bigint, p_max_releases bigint, p_max_lasts bigint, p_count_key bigint,
	p_shift_expires boolean[], p_shift_rat boolean[])
RETURNS TABLE (o_state text, o_version bigint, o_fence bigint, o_now float8, o_reading float8, o_issued bigint,
	o_leases bigint, o_releases bigint, o_lasts bigint, o_listening boolean)
LANGUAGE plpgsql AS $$
DECLARE
	sync text := current_setting('synchronous_commit');
	wrote boolean := false;
	d record;
BEGIN
	FOR i IN 1 .. coalesce(array_length(p_resources, 1), 0) LOOP
		BEGIN
			SELECT * INTO STRICT d FROM lease_fence_decide(p_resources[i], p_versions[i], p_nows[i], p_offset, p_untils[i], p_writes[i], false,
				p_holders[i], p_requests[i], p_fences[i], p_expires[i], p_secrets[i], p_releases[i], p_lasts[i],
				p_sweeps[i], p_owner[i], p_values[i], p_rholders[i], p_rfences[i], p_rats[i],
				0, 0, 0, '{}'::text[], '{}'::bigint[], p_max_leases, p_max_releases, p_max_lasts, p_count_key,
				p_shift_expires[i], p_shift_rat[i], '{}'::integer[], '{}'::float8[]);
			o_state := '';
			o_version := d.o_version;
			o_fence := d.o_fence;
			o_now := d.o_now;
			o_reading := d.o_reading;
			o_issued := d.o_issued;
			o_leases := d.o_leases;
			o_releases := d.o_releases;
			o_lasts := d.o_lasts;
			o_listening := d.o_listening;
			wrote := wrote OR p_writes[i] <> 0;
		EXCEPTION WHEN OTHERS THEN
			o_state := SQLSTATE;
			o_version := NULL;
			o_fence := NULL;
			o_now := NULL;
			o_reading := NULL;
			o_issued := NULL;
			o_leases := NULL;
			o_releases := NULL;
			o_lasts := NULL;
			o_listening := NULL;
		END;
		RETURN NEXT;
	END LOOP;
	IF wrote THEN
		PERFORM set_config('synchronous_commit', sync, true);
	END IF;
END
$$

-- name: call_each
SELECT o_state, o_version, o_fence, o_now, o_reading, o_issued, o_leases, o_releases, o_lasts, o_listening
	FROM lease_fence_decide_each($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
		$21, $22, $23, $24, $25)
