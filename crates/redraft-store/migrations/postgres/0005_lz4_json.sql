-- Specs, results and attempt records are JSON of a few kilobytes (more with long prompts or
-- documents): stored compressed, and pglz (the default) takes a tenth of the database's CPU
-- when runs come in bursts. lz4 does the same work several times faster. It needs
-- PostgreSQL 14 or later built with lz4; elsewhere the columns keep the default, and nothing
-- else changes. Values already stored keep their compression until rewritten.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE runs ALTER COLUMN spec SET COMPRESSION lz4, ALTER COLUMN result SET COMPRESSION lz4';
    EXECUTE 'ALTER TABLE attempts ALTER COLUMN record SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR syntax_error OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 compression is not available on this server: JSON columns keep the default compression';
END
$$;
