import CoatyKit

/// A custom object type that both CoatyKit and the Coaty JS peer publish and observe.
struct Lamp: CoatyObject, Hashable {
    static let objectType = "com.example.interop.Lamp"
    var objectId = CoatyUUID()
    var name: String
    var externalId: String?
    var isOn: Bool
    var brightness: Int
    /// The objectId of the lamp's ``Room`` (a Query joins it).
    var roomId: CoatyUUID?
}

/// The object a Query's join condition relates to lamps by their `roomId`.
struct Room: CoatyObject, Hashable {
    static let objectType = "com.example.interop.Room"
    var objectId = CoatyUUID()
    var name: String
    var floor: Int
}

extension Lamp {
    /// The wire JSON of this lamp (what CoatyKit publishes and agent.js is given); `null` if it
    /// could not be encoded, which no comparison accepts.
    var json: JSONValue { (try? AnyCoatyObject(self).jsonValue) ?? .null }
}

/// The JSON text of objects, for agent.js's `--objects` / `--object`.
/// - Parameter objects: the objects.
/// - Returns: a JSON array of their wire forms.
func jsonArgument(_ objects: [any CoatyObject]) throws -> String {
    jsonText(.array(try objects.map { try AnyCoatyObject($0).jsonValue }))
}

/// The room the kitchen and desk lamps of ``sampleLamps()`` are in.
let sampleRoom = Room(name: "Ground floor", floor: 0)

/// The lamps the responders of both sides hold (one set of objectIds per test run): names,
/// brightness and `isOn` to filter, order and page on; the first two have external ids, two are
/// in ``sampleRoom``.
let sampleLamps: [Lamp] = {
    [
        Lamp(name: "Lamp kitchen", externalId: "ext-kitchen", isOn: true, brightness: 80, roomId: sampleRoom.objectId),
        Lamp(name: "Lamp hall", externalId: "ext-hall", isOn: false, brightness: 10),
        Lamp(name: "Lamp desk", isOn: true, brightness: 55, roomId: sampleRoom.objectId),
        Lamp(name: "Lamp porch", isOn: true, brightness: 30),
        Lamp(name: "Spot garden", isOn: true, brightness: 95),
    ]
}()

/// The registry the CoatyKit agents of these tests decode with.
func interopRegistry() -> CoatyObjectRegistry {
    CoatyObjectRegistry([Lamp.self, Room.self])
}

extension JSONValue {
    /// The `objectId` member parsed as a UUID.
    var objectIdValue: CoatyUUID? { self["objectId"]?.stringValue.flatMap(CoatyUUID.init) }
}
