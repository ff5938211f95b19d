-- ragstore.offline_embed, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- The fingerprint of docs/decisions.md ("The offline backend"), bit-identical to
-- ragstore.embed.offline.fingerprint. ascii() returns the code point because ragstore migrate insists
-- on a UTF8 database.
-- Called by: everyone.

CREATE OR REPLACE FUNCTION ragstore.offline_embed(input text) RETURNS vector(16)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
DECLARE
    codes  bigint[];
    n      integer;
    h      bigint;
    mult   bigint;
    result real[] := ARRAY[]::real[];
BEGIN
    IF input = '' THEN
        RAISE EXCEPTION 'ragstore.offline_embed: empty text is never embedded'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    codes := ARRAY(
        SELECT ascii(c)::bigint
        FROM unnest(string_to_array(input, NULL)) WITH ORDINALITY AS t(c, i)
        ORDER BY i
    );
    n := cardinality(codes);
    FOR s IN 0..15 LOOP
        mult := 16777619 + 2 * s;                          -- 0x01000193 + 2s
        h := mod((s + 1)::bigint * 2654435761, 4294967296);  -- (s+1) * 0x9E3779B1 mod 2^32
        FOR i IN 1..n LOOP
            h := mod(h * mult + codes[i] * i, 4294967296);
        END LOOP;
        result := result || ((h::float8 / 2147483648.0 - 1.0)::real);
    END LOOP;
    RETURN result::vector(16);
END
$fn$;
COMMENT ON FUNCTION ragstore.offline_embed(text) IS
    'ragstore offline backend (fingerprint-v1, 16-d): not semantic; bit-identical to the Python backend';
