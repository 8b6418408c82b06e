// API keys (pathweave_api.keys): one ApiKey node per key, in the store every API replica
// and worker shares, so a key created or revoked through any of them holds in all at once.
// They belong to the key registry, `$tenant` = `_keys` (a name no tenant can have: tenant
// names start with a letter or digit); `key_tenant` is the tenant the key may use. The
// secret is stored only as its argon2id hash.

// name: constraint_api_key
CREATE CONSTRAINT api_key_id IF NOT EXISTS FOR (n:ApiKey) REQUIRE n.key_id IS UNIQUE;

// name: api_key_create
// A new key (the id is random: a clash fails on the constraint and nothing is written).
// $principals: what its callers read (null: the whole tenant); $delegate: it may ask on
// behalf of an end user (pathweave.access).
CREATE (k:ApiKey {key_id: $key_id})
SET k.tenant = $tenant, k.key_tenant = $key_tenant, k.name = $key_name, k.secret_hash = $secret_hash,
    k.created_at = $created_at, k.rate_limit_per_s = $rate_limit_per_s, k.scope = $scope,
    k.principals = $principals, k.delegate = $delegate
RETURN k.key_id AS key_id;

// name: api_key_import
// Keys of the SQLite key file of earlier versions, each kept as it was (id, hash, revocation);
// a key already in the registry is left unchanged.
UNWIND $rows AS row
MERGE (k:ApiKey {key_id: row.key_id})
ON CREATE SET k.tenant = $tenant, k.key_tenant = row.key_tenant, k.name = row.name,
              k.secret_hash = row.secret_hash, k.created_at = row.created_at, k.revoked_at = row.revoked_at,
              k.rate_limit_per_s = row.rate_limit_per_s, k.scope = row.scope
RETURN count(k) AS n;

// name: api_key_get
// One key by id, with its hash (for verification; never returned to a caller).
MATCH (k:ApiKey {key_id: $key_id}) WHERE k.tenant = $tenant
RETURN k.key_id AS key_id, k.key_tenant AS key_tenant, k.name AS name, k.secret_hash AS secret_hash,
       k.created_at AS created_at, k.revoked_at AS revoked_at, k.rate_limit_per_s AS rate_limit_per_s,
       k.scope AS scope, k.principals AS principals, coalesce(k.delegate, false) AS delegate;

// name: api_key_list
// Every key, oldest first.
MATCH (k:ApiKey) WHERE k.tenant = $tenant
RETURN k.key_id AS key_id, k.key_tenant AS key_tenant, k.name AS name, k.secret_hash AS secret_hash,
       k.created_at AS created_at, k.revoked_at AS revoked_at, k.rate_limit_per_s AS rate_limit_per_s,
       k.scope AS scope, k.principals AS principals, coalesce(k.delegate, false) AS delegate
ORDER BY k.created_at, k.key_id;

// name: api_key_revoke
// Revokes an active key: the number revoked (0: no such active key).
MATCH (k:ApiKey {key_id: $key_id}) WHERE k.tenant = $tenant AND k.revoked_at IS NULL
SET k.revoked_at = $revoked_at
RETURN count(k) AS n;
