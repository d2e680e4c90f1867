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
        }
        let full = PromotedColumns(cases[0])
        #expect(full.objectId == id.uuidString && full.name == "lamp" && full.externalId == "e-1")
        let repeated = PromotedColumns(cases[5])
        #expect(repeated.name == nil, "the first member named name is a number")
        #expect(repeated.objectId == "a")
    }
}
