import CoatyCore
import PropertyBased
import Testing

/// Random core objects carrying random unknown members (top level and nested).
enum RandomObjects {
    static func custom<R: RandomNumberGenerator>(_ rng: inout R) -> JSONObject {
        var object = JSONObject()
        for _ in 0..<Int.random(in: 0...4, using: &rng) {
            // A prefix keeps random keys clear of the declared field names.
            object["x_" + RandomJSON.string(&rng)] = RandomJSON.value(&rng, depth: 2)
        }
        return object
    }

    static func finite<R: RandomNumberGenerator>(_ rng: inout R) -> Double { RandomJSON.double(&rng) }

    static let task = Generator<CoatyTask, Shrink.None<CoatyTask>>(run: { rng in
        var task = CoatyTask(
            objectType: Bool.random(using: &rng) ? "coaty.Task" : "com.example.T" + RandomJSON.string(&rng),
            name: RandomJSON.string(&rng),
            status: TaskStatus.allCases.randomElement(using: &rng)!,
            creatorId: CoatyUUID(randomUsing: &rng),
            creationTimestamp: finite(&rng),
            custom: custom(&rng)
        )
        if Bool.random(using: &rng) { task.duration = finite(&rng) }
        if Bool.random(using: &rng) { task.requirements = custom(&rng) }
        if Bool.random(using: &rng) { task.externalId = RandomJSON.string(&rng) }
        if Bool.random(using: &rng) { task.isDeactivated = Bool.random(using: &rng) }
        return task
    })

    static let location = Generator<Location, Shrink.None<Location>>(run: { rng in
        var coords = GeoCoordinates(latitude: finite(&rng), longitude: finite(&rng), accuracy: finite(&rng))
        coords.custom = custom(&rng)
        if Bool.random(using: &rng) { coords.speed = finite(&rng) }
        var geo = GeoLocation(coords: coords, timestamp: finite(&rng))
        geo.custom = custom(&rng)
        return Location(name: RandomJSON.string(&rng), geoLocation: geo, custom: custom(&rng))
    })
}

@Suite("Core object properties")
struct CoatyObjectPropertyTests {
    @Test func taskSurvivesTheWireWithUnknownMembers() async {
        await propertyCheck(count: 200, input: RandomObjects.task) { task in
            let bytes = try JSONValueEncoder().encodeToBytes(task)
            let any = try CoatyObjectRegistry().decode(bytes: bytes)
            let decoded = try #require(any.as(CoatyTask.self))
            #expect(decoded == task)
            // Re-publishing writes the same text: the received JSON, or the struct re-encoded.
            #expect(try JSONValueEncoder().encodeToBytes(any) == bytes)
            #expect(try JSONValueEncoder().encodeToBytes(decoded) == bytes)
        }
    }

    @Test func locationKeepsNestedUnknownMembers() async {
        await propertyCheck(count: 200, input: RandomObjects.location) { location in
            let json = try JSONValueEncoder().encode(location)
            let decoded = try #require(try CoatyObjectRegistry().decode(json).as(Location.self))
            #expect(decoded == location)
            #expect(decoded.geoLocation.coords.custom == location.geoLocation.coords.custom)
        }
    }
}
