import CoatyCore
import Testing

@Suite struct JSONValueBasics {
    @Test func objectEqualityIgnoresKeyOrder() {
        let a: JSONValue = ["x": 1, "y": "z"]
        let b: JSONValue = ["y": "z", "x": 1.0]
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a.objectValue?.keys == ["x", "y"])
    }
}
