-- lease_fence_decide as schema version 6 (and 5) made it, for the test of
-- the upgrade from version 6 (upgrade_test.go): a state of version 6 has
-- this function. Tokens as in decide.sql.

-- name: decide
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
DECLARE
	v bigint;
	decided float8;
	shift float8;
	rel bytea := p_releases;
	i integer;
BEGIN
	IF p_dl > 0 AND NOT pg_try_advisory_xact_lock_shared(p_count_key) THEN
		RAISE EXCEPTION 'lease_fence_decide: the counts are locked' USING ERRCODE = 'LF000';
	END IF;
	SELECT coalesce(sum(leases), 0)::bigint, coalesce(sum(releases), 0)::bigint, coalesce(sum(lasts), 0)::bigint
		INTO o_leases, o_releases, o_lasts FROM lease_fence_totals;
	IF (p_dl > 0 AND o_leases >= p_max_leases - current_setting('max_connections')::bigint)
		OR (p_dr > 0 AND o_releases >= p_max_releases) OR (p_dk > 0 AND o_lasts >= p_max_lasts) THEN
		RAISE EXCEPTION 'lease_fence_decide: a count is near its bound' USING ERRCODE = 'LF000';
	END IF;
	IF p_write = 0 THEN
		-- Nothing to make durable: the row's lock (and a placeholder's
		-- insert) need no wait for the disk.
		PERFORM set_config('synchronous_commit', 'off', true);
	END IF;
	-- The row is locked even for a decision that writes nothing, so that
	-- one made at a reading after that of a decision still in flight on the
	-- row waits for it (and then finds the row changed).
	IF p_version = 0 THEN
		INSERT INTO lease_fence_leases (resource, decided_at, sweep_at) VALUES (p_resource, 0, 0) ON CONFLICT (resource) DO NOTHING;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'lease_fence_decide: the row was made' USING ERRCODE = 'LF000';
		END IF;
		decided := 0;
	ELSE
		SELECT xmin::text::bigint, decided_at INTO v, decided FROM lease_fence_leases WHERE resource = p_resource FOR UPDATE;
		IF v IS DISTINCT FROM p_version THEN
			RAISE EXCEPTION 'lease_fence_decide: the row changed' USING ERRCODE = 'LF000';
		END IF;
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
	IF p_write = 1 THEN
		UPDATE lease_fence_leases SET holder_id = p_holder, request_id = p_request, fence = o_fence,
			expires_at = p_expires + CASE WHEN p_shift_expires THEN shift ELSE 0 END, secret_sha256 = p_secret, releases = rel,
			decided_at = o_reading, sweep_at = p_sweep, last_fence = p_last, owner = p_owner, value = p_value,
			revoked_holder = p_rholder, revoked_fence = p_rfence, revoked_at = p_rat + CASE WHEN p_shift_rat THEN shift ELSE 0 END
			WHERE resource = p_resource RETURNING xmin::text::bigint INTO o_version;
	ELSIF p_write = 2 OR p_version = 0 THEN
		-- A deletion, or the placeholder of a decision that writes nothing.
		DELETE FROM lease_fence_leases WHERE resource = p_resource;
		o_version := 0;
	ELSE
		o_version := p_version;
	END IF;
	IF p_dl <> 0 OR p_dr <> 0 OR p_dk <> 0 THEN
		UPDATE lease_fence_totals SET leases = leases + p_dl, releases = releases + p_dr, lasts = lasts + p_dk
			WHERE slot = pg_backend_pid() % {slots};
		o_leases := o_leases + p_dl;
		o_releases := o_releases + p_dr;
		o_lasts := o_lasts + p_dk;
	END IF;
	FOR i IN 1 .. coalesce(array_length(p_owners, 1), 0) LOOP
		INSERT INTO lease_fence_owners AS o (owner, slot, leases) VALUES (p_owners[i],
			coalesce((SELECT slot FROM lease_fence_owners WHERE owner = p_owners[i] ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED),
				floor(random() * {slots})::integer), p_deltas[i])
			ON CONFLICT (owner, slot) DO UPDATE SET leases = o.leases + excluded.leases;
	END LOOP;
	SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END INTO o_issued FROM lease_fence_fences;
	SELECT m.listening_until > (extract(epoch FROM clock_timestamp()) * 1000)::float8 INTO o_listening FROM lease_fence_meta m;
END
$$

