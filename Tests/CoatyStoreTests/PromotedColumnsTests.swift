import CoatyCore
import CoatyStore
import Testing

@Suite("Promoted columns read from an item's JSON")
struct PromotedColumnsTests {
    /// The columns as seven lookups find them (the first member of a name).
    private func lookedUp(_ object: JSONValue) -> [String?] {
        PromotedColumns.names.map { object[$0]?.stringValue }
    }

    @Test("each column is its member's string, in any order, the first of a repeated name, nil for other kinds")
    func columnsAsLookupsFindThem() throws {
        let id = CoatyUUID()
        let cases: [JSONValue] = [
            [
                "objectType": "com.example.Light", "coreType": "CoatyObject", "objectId": .string("\(id)"),
                "name": "lamp", "externalId": "e-1", "parentObjectId": .string("\(CoatyUUID())"),
                "locationId": .string("\(CoatyUUID())"), "extra": 1,
            ],
            ["locationId": 5, "name": nil, "externalId": ["x"], "objectId": true, "coreType": 2.5],
            ["nameX": "no", "objectIds": "no", "objectid": "no", "": "no"],
            [:],
            "not an object",
            .object(
                JSONObject(uncheckedKeys: ["name", "name", "objectId", "objectId"], values: [1, "second", "a", "b"])
            ),
        ]
        for object in cases {
            let columns = PromotedColumns(object)
            #expect(PromotedColumns.names.map { columns[$0] } == lookedUp(object), "\(object)")
            // Read from the text's member index (or, for repeated keys, its parsed tree, where the
            // last value of a name sits at the first one's place): those of the parsed text.
            let text = Array(object.serializedString().utf8)
            #expect(PromotedColumns(text: text) == PromotedColumns(try JSONValue(parsing: text)), "\(object)")
        }
        #expect(PromotedColumns(text: Array(#" {"name" : "a\"b", "objectId":"x"} "#.utf8)).name == "a\"b")
        #expect(PromotedColumns(text: Array("{".utf8)) == PromotedColumns(.null))
        let full = PromotedColumns(cases[0])
        #expect(full.objectId == id.uuidString && full.name == "lamp" && full.externalId == "e-1")
        let repeated = PromotedColumns(cases[5])
        #expect(repeated.name == nil, "the first member named name is a number")
        #expect(repeated.objectId == "a")
    }
}

@Suite("A row made from its stored texts")
struct TextRowTests {
    @Test("parsed when read, equal to the parsed row; setting the object drops the text, setting the text keeps the object")
    func deferredRow() throws {
        let index = StoreIndex("com.example.L", "1")
        let text = Array(#"{"objectId":"1","name":"lamp","n":[1,2.5]}"#.utf8)
        let metadata = Array(#"{"sourceId":"s"}"#.utf8)
        let row = StoreRow(index: index, objectText: text, metadataText: metadata)
        let parsed = StoreRow(index: index, object: try JSONValue(parsing: text), metadata: try JSONValue(parsing: metadata))
        #expect(row.isObjectDeferred && !parsed.isObjectDeferred)
        #expect(row.object == parsed.object && row.metadata == parsed.metadata)
        #expect(row == parsed && row.hashValue == parsed.hashValue)
        #expect(row.objectText == text)
        // The parsed copy a store keeps as a value: the same row, with the tree.
        let kept = row.withParsedJSON
        #expect(!kept.isObjectDeferred && kept == parsed && kept.objectText == text)

        var changed = row
        changed.object = ["name": "other"]
        #expect(changed.objectText == nil, "the text is no longer the object's")
        #expect(changed.object == ["name": "other"])

        var retexted = row
        retexted.objectText = Array(#"{"name":"lamp","objectId":"1","n":[1,2.5]}"#.utf8)
        #expect(retexted.object == parsed.object, "the object the first text was")
        #expect(!retexted.isObjectDeferred)

        let broken = StoreRow(index: index, objectText: Array("{".utf8))
        #expect(broken.object == .null && broken.metadata == nil)
    }
}
