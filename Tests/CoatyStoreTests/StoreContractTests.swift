import CoatyRecording
import CoatyStore
import CoatyStoreTestSupport
import Testing

/// The shared ``StoreContract`` (Coaty JS's `db-in-memory.spec.ts`, transactions, metadata, the
/// local store and the typed API) against the in-memory and SQLite backends.
@Suite("Store contract")
struct StoreContractTests {
    /// The spec's steps in its order (each depends on the previous one's state).
    @Test(arguments: Backend.allCases)
    func coatyDatabaseSpec(_ backend: Backend) async throws {
        try await StoreContract.spec(objectRepository(backend.makeConnection()))
    }

    @Test(arguments: Backend.allCases)
    func failedWriteRollsBack(_ backend: Backend) async throws {
        try await StoreContract.rollback(backend.makeConnection())
    }

    @Test(arguments: Backend.allCases)
    func manyRowsWrittenAtOnce(_ backend: Backend) async throws {
        try await StoreContract.manyRows(backend.makeConnection())
    }

    @Test(arguments: Backend.allCases)
    func transactionBodiesAwait(_ backend: Backend) async throws {
        try await StoreContract.awaitingBodies(backend.makeConnection())
    }

    @Test(arguments: Backend.allCases)
    func localKeyValueStore(_ backend: Backend) async throws {
        try await StoreContract.local(backend.makeConnection())
    }

    @Test(arguments: Backend.allCases)
    func receiptMetadataIsStoredBesideTheObject(_ backend: Backend) async throws {
        try await StoreContract.receipts(backend.makeConnection())
    }

    @Test(arguments: Backend.allCases)
    func typedItemsRoundTrip(_ backend: Backend) async throws {
        try await StoreContract.typed(backend.makeConnection())
    }

    @Test(arguments: Backend.allCases)
    func largeFiltersAreAnswered(_ backend: Backend) async throws {
        try await StoreContract.largeFiltersAreAnswered(backend.makeConnection())
    }

    @Test(arguments: Backend.allCases)
    func repositoryOfPersistableType(_ backend: Backend) async throws {
        try await StoreContract.persistableRepository(backend.makeConnection())
    }
}

@Suite("Store contract: scopes and concurrency")
struct StoreScopeTests {
    @Test(arguments: Backend.allCases)
    func repositoryScopedLikeAQuery(_ backend: Backend) async throws {
        try await StoreContract.scoped(backend.makeConnection())
    }

    @Test(arguments: Backend.allCases)
    func concurrentWritersLoseNothing(_ backend: Backend) async throws {
        try await StoreContract.concurrent(backend.makeConnection())
    }
}
