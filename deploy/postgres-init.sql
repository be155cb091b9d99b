-- Run once by the postgres image on a new data directory (/docker-entrypoint-initdb.d/), as
-- POSTGRES_USER, which that image makes a superuser, and a superuser is not bound by row-level
-- security. So the platform takes this role on every connection (DATABASE_ROLE, SET ROLE): no
-- superuser, no BYPASSRLS, owner of the database so that it migrates and owns the tables; the tenant
-- wall's FORCEd policies bind it (docs/operations.md "Tenant wall", AMB-96).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mcp_app') THEN
    CREATE ROLE mcp_app NOLOGIN NOSUPERUSER NOBYPASSRLS;
  END IF;
  EXECUTE format('ALTER DATABASE %I OWNER TO mcp_app', current_database());
END
$$;
