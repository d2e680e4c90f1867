import CoatyCore
import CoatyRecording
import CoatyStore
import CoatyStoreTestSupport
import Testing

/// A transaction double that records every primitive call and answers from canned rows, so the
/// typed API is tested without any database (as the YapDatabaseExtensions article does).
final class RecordingTransaction: WriteTransactionType {
    enum Call: Equatable {
        case row(StoreIndex)
        case keys(String)
        case rows(StoreQuery)
        case count(StoreQuery)
        case write(StoreRow, StoreWriteMode)
        case remove(StoreIndex)
        case removeRows(StoreQuery)
        case localValue(String)
        case localKeys
        case setLocal(String, JSONValue?)
    }

    var calls: [Call] = []
    var rowsByIndex: [StoreIndex: StoreRow] = [:]
    var queryResult: [StoreRow] = []

    func row(at index: StoreIndex) -> StoreRow? {
        calls.append(.row(index))
        return rowsByIndex[index]
    }

    func keys(in collection: String) -> [String] {
        calls.append(.keys(collection))
        return rowsByIndex.keys.filter { $0.collection == collection }.map(\.key).sorted()
    }

    func rows(matching query: StoreQuery) -> [StoreRow] {
        calls.append(.rows(query))
        return queryResult
    }

    func count(matching query: StoreQuery) -> Int {
        calls.append(.count(query))
        return queryResult.count
    }

    func localValue(forKey key: String, in store: String) -> JSONValue? {
        calls.append(.localValue(key))
        return nil
    }

    func localKeys(in store: String) -> [String] {
        calls.append(.localKeys)
        return []
    }

    func localStores() -> [String] { [] }

    func write(_ row: StoreRow, mode: StoreWriteMode) -> Bool {
        calls.append(.write(row, mode))
        return true
    }

    func removeRow(at index: StoreIndex) -> Bool {
        calls.append(.remove(index))
        return rowsByIndex[index] != nil
    }

    func removeRows(matching query: StoreQuery) -> [StoreIndex] {
        calls.append(.removeRows(query))
        return queryResult.map(\.index)
    }

    func setLocalValue(_ value: JSONValue?, forKey key: String, in store: String) {
        calls.append(.setLocal(key, value))
    }
}

@Suite("Typed API over a recording transaction")
struct TypedAPITransactionTests {
    @Test func readByKeyAsksForTheIndexOfTheCollection() async throws {
        let tx = RecordingTransaction()
        tx.rowsByIndex[StoreIndex("settings", "volume")] = StoreRow(
            index: StoreIndex("settings", "volume"),
            object: ["id": "volume", "value": 7],
            metadata: ["changedBy": "alice"]
        )
        let setting = try await Setting.read(tx).byKey("volume")
        #expect(setting == Setting(id: "volume", value: 7))
        #expect(tx.calls == [.row(StoreIndex("settings", "volume"))])

        let stored = try await #require(try Setting.read(tx).withMetadata.byKey("volume"))
        #expect(stored.metadata == Setting.Audit(changedBy: "alice"))
        #expect(stored.index == StoreIndex("settings", "volume"))
    }

    @Test func missingKeyReadsNil() async throws {
        let tx = RecordingTransaction()
        await #expect(try Setting.read(tx).byKey("none") == nil)
        await #expect(try Setting.read(tx).byKeys(["a", "b"]).isEmpty)
        #expect(
            tx.calls == [
                .row(StoreIndex("settings", "none")), .row(StoreIndex("settings", "a")),
                .row(StoreIndex("settings", "b")),
            ]
        )
    }

    @Test func writeEncodesItemAndMetadataBesideIt() async throws {
        let tx = RecordingTransaction()
        try await Setting(id: "volume", value: 7).write(to: tx, metadata: Setting.Audit(changedBy: "bob"))
        try await Note(id: 3, text: "hi").write(to: tx)
        #expect(
            tx.calls == [
                .write(
                    StoreRow(
                        index: StoreIndex("settings", "volume"),
                        object: ["id": "volume", "value": 7],
                        metadata: ["changedBy": "bob"]
                    ),
                    .upsert
                ),
                .write(
                    StoreRow(index: StoreIndex("notes", "3"), object: ["id": 3, "text": "hi"], metadata: nil),
                    .upsert
                ),
            ]
        )
    }

    @Test func sequencesWriteAndRemoveEachItem() async throws {
        let tx = RecordingTransaction()
        let notes = [Note(id: 1, text: "a"), Note(id: 2, text: "b")]
        try await notes.write(to: tx)
        let removed = try await notes.remove(from: tx)
        #expect(removed == 0)
        #expect(tx.calls.count == 4)
        #expect(tx.calls[2] == .remove(StoreIndex("notes", "1")))
        #expect(tx.calls[3] == .remove(StoreIndex("notes", "2")))
    }

    @Test func matchingPassesTheFilterAndScope() async throws {
        let tx = RecordingTransaction()
        tx.queryResult = [StoreRow(index: StoreIndex("notes", "1"), object: ["id": 1, "text": "a"])]
        let filter = ObjectFilter.where("text", .equals("a")).take(1)
        await #expect(try Note.read(tx).matching(filter) == [Note(id: 1, text: "a")])
        await #expect(try Note.read(tx).all() == [Note(id: 1, text: "a")])
        #expect(
            tx.calls == [
                .rows(StoreQuery(scope: .collection("notes"), filter: filter)),
                .rows(StoreQuery(scope: .collection("notes"))),
            ]
        )
    }

    @Test func filterExistingUsesTheCollectionKeys() async throws {
        let tx = RecordingTransaction()
        tx.rowsByIndex[StoreIndex("notes", "2")] = StoreRow(
            index: StoreIndex("notes", "2"),
            object: ["id": 2, "text": "x"]
        )
        await #expect(try Note.read(tx).existingKeys(["1", "2", "3"]) == ["2"])
        #expect(tx.calls == [.keys("notes")])
    }

    @Test func coatyObjectsAreStoredByObjectTypeAndObjectId() async throws {
        let tx = RecordingTransaction()
        let light = Light(name: "Lamp", isOn: true, luminance: 0.5)
        let receipt = ReceiptMetadata(sourceId: nil, eventType: "Advertise", topic: "coaty/3/-/ADV:com.example.Light/x")
        try await light.write(to: tx, metadata: receipt)
        guard case .write(let row, .upsert)? = tx.calls.first else {
            Issue.record("no write recorded")
            return
        }
        #expect(row.index == StoreIndex("com.example.Light", light.objectId.uuidString))
        #expect(row.object["objectType"] == "com.example.Light")
        #expect(row.object["topic"] == nil)
        #expect(row.metadata?["topic"] == .string(receipt.topic))

        tx.rowsByIndex[row.index] = row
        let read = try await #require(try Light.read(tx).withMetadata.byKey(light.objectId.uuidString))
        #expect(read.item == light)
        #expect(read.metadata?.eventType == "Advertise")
    }

    @Test func anyCoatyObjectLooksUpAKeyAcrossCollections() async throws {
        let tx = RecordingTransaction()
        _ = try await AnyCoatyObject.read(tx).byKey("k")
        #expect(tx.calls == [.rows(StoreQuery(scope: .coatyObjects, keys: ["k"]))])
    }

    @Test func coreTypeStructReadsItsCoreType() async throws {
        let tx = RecordingTransaction()
        _ = try await CoatyTask.read(tx).all()
        #expect(tx.calls == [.rows(StoreQuery(scope: .coreTypes(["Task"])))])
    }

    @Test func removeAllRemovesTheScope() async throws {
        let tx = RecordingTransaction()
        _ = try await Light.removeAll(from: tx)
        #expect(tx.calls == [.removeRows(StoreQuery(scope: .collection("com.example.Light")))])
    }

    @Test func wrongJSONThrowsADecodingError() async {
        let tx = RecordingTransaction()
        tx.rowsByIndex[StoreIndex("notes", "1")] = StoreRow(
            index: StoreIndex("notes", "1"),
            object: ["id": "not a number"]
        )
        await #expect(throws: (any Error).self) { try await Note.read(tx).byKey("1") }
    }
}
