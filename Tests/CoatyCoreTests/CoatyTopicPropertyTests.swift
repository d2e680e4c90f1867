import CoatyCore
import PropertyBased
import Testing

/// Random topic parts and topics for property checks.
enum RandomTopics {
    static let safe = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
    static let unusual: [Character] = [":", "ä", "€", "😀", " ", "$", "\\", "?"]

    /// A valid topic component: mostly the safe set, sometimes colons and non-ASCII characters.
    static func component<R: RandomNumberGenerator>(_ rng: inout R) -> String {
        var text = ""
        for _ in 0..<Int.random(in: 1...12, using: &rng) {
            if Int.random(in: 0..<8, using: &rng) == 0 {
                text.append(unusual.randomElement(using: &rng)!)
            } else {
                text.append(safe.randomElement(using: &rng)!)
            }
        }
        return text
    }

    static func event<R: RandomNumberGenerator>(_ rng: inout R) -> CoatyTopic.Event {
        let typeFilter: CoatyTopic.TypeFilter =
            Bool.random(using: &rng)
            ? .coreType(CoreType.allCases.randomElement(using: &rng)!) : .objectType(component(&rng))
        switch Int.random(in: 0..<13, using: &rng) {
        case 0: return .advertise(typeFilter)
        case 1: return .deadvertise
        case 2: return .channel(id: component(&rng))
        case 3: return .associate(ioContextName: component(&rng))
        case 4: return .ioValue
        case 5: return .discover
        case 6: return .resolve
        case 7: return .query
        case 8: return .retrieve
        case 9: return .update(typeFilter)
        case 10: return .complete
        case 11: return .call(operation: component(&rng))
        default: return .return
        }
    }

    struct Parts: Sendable, CustomStringConvertible {
        var event: CoatyTopic.Event
        var namespace: String
        var sourceId: CoatyUUID
        var correlationId: CoatyUUID?
        var description: String { "\(event) ns=\(namespace)" }
    }

    static let parts = Generator<Parts, Shrink.None<Parts>>(run: { rng in
        let event = event(&rng)
        var source = rng
        return Parts(
            event: event,
            namespace: Int.random(in: 0..<4, using: &rng) == 0 ? "-" : component(&rng),
            sourceId: CoatyUUID(randomUsing: &source),
            correlationId: event.eventType.isTwoWay ? CoatyUUID(randomUsing: &rng) : nil
        )
    })

    /// A valid topic with a few random edits: inserted, deleted or replaced characters that
    /// matter to the grammar.
    static let mutated = Generator<String, Shrink.None<String>>(run: { rng in
        var source = rng
        let event = event(&rng)
        let topic =
            (try? CoatyTopic(
                event: event,
                namespace: component(&rng),
                sourceId: CoatyUUID(randomUsing: &source),
                correlationId: event.eventType.isTwoWay ? CoatyUUID(randomUsing: &rng) : nil
            ))?.name ?? "coaty/3/-/DAD"
        var characters = Array(topic)
        let edits: [Character] = ["/", ":", "+", "#", "\u{0}", "3", "A", "a", "-", "F", "4", "8", "€", "c"]
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            let position = Int.random(in: 0...characters.count, using: &rng)
            switch Int.random(in: 0..<3, using: &rng) {
            case 0:
                characters.insert(edits.randomElement(using: &rng)!, at: position)
            case 1 where position < characters.count:
                characters.remove(at: position)
            default:
                if position < characters.count { characters[position] = edits.randomElement(using: &rng)! }
            }
        }
        return String(characters)
    })

    /// Small topics and filters over a tiny alphabet, so that matches are frequent.
    static let topicAndFilter = Generator<[String], Shrink.None<[String]>>(run: { rng in
        let topicLevels = ["a", "b", "", "$x", "$SYS"]
        let filterLevels = ["a", "b", "", "+", "$x", "$SYS"]
        let topic = (0..<Int.random(in: 1...4, using: &rng)).map { _ in topicLevels.randomElement(using: &rng)! }
        var filter = (0..<Int.random(in: 1...4, using: &rng)).map { _ in filterLevels.randomElement(using: &rng)! }
        if Int.random(in: 0..<3, using: &rng) == 0 { filter[filter.count - 1] = "#" }
        // Topic names and filters have at least one character.
        let topicName = topic.joined(separator: "/")
        let filterText = filter.joined(separator: "/")
        return [topicName.isEmpty ? "a" : topicName, filterText.isEmpty ? "+" : filterText]
    })
}

/// MQTT 3.1.1 matching written the slow, obvious way from the specification.
func referenceMatches(topic: String, filter: String) -> Bool {
    if topic.hasPrefix("$") && (filter.hasPrefix("+") || filter.hasPrefix("#")) { return false }
    let t = topic.split(separator: "/", omittingEmptySubsequences: false)
    let f = filter.split(separator: "/", omittingEmptySubsequences: false)
    func match(_ i: Int, _ j: Int) -> Bool {
        if j == f.count { return i == t.count }
        if f[j] == "#" { return true }
        if i == t.count { return false }
        return (f[j] == "+" || f[j] == t[i]) && match(i + 1, j + 1)
    }
    return match(0, 0)
}

@Suite("Coaty topic properties")
struct CoatyTopicPropertyTests {
    @Test("building then parsing returns the parts, and the subscription filters match")
    func buildParseRoundTrip() async {
        await propertyCheck(count: 1000, input: RandomTopics.parts) { parts in
            let built = try? CoatyTopic(
                event: parts.event,
                namespace: parts.namespace,
                sourceId: parts.sourceId,
                correlationId: parts.correlationId
            )
            guard let built else {
                Issue.record("valid parts were rejected: \(parts)")
                return
            }
            let parsed = try? CoatyTopic(parsing: built.name)
            #expect(parsed == built)
            #expect(parsed?.event == parts.event)
            #expect(parsed?.namespace == parts.namespace[...])
            #expect(parsed?.sourceUUID == parts.sourceId)
            #expect(parsed?.correlationUUID == parts.correlationId)

            let responseId = parts.event.eventType.isResponse ? parts.correlationId : nil
            for cross in [false, true] {
                let filter = try? CoatyTopic.subscriptionFilter(
                    for: parts.event,
                    namespace: parts.namespace,
                    crossNamespacing: cross,
                    correlationId: responseId?.uuidString
                )
                #expect(filter.map { MQTTTopicFilter.matches(topic: built.name, filter: $0) } == true)
            }
        }
    }

    @Test("edited topics never trap, and whatever parses rebuilds to the same topic")
    func mutatedTopics() async {
        await propertyCheck(count: 3000, input: RandomTopics.mutated) { topic in
            switch CoatyTopic.classify(topic) {
            case .coaty(let parsed):
                let rebuilt = try? CoatyTopic(
                    event: parsed.event,
                    namespace: String(parsed.namespace),
                    sourceId: String(parsed.sourceId),
                    correlationId: parsed.correlationId.map(String.init)
                )
                #expect(rebuilt?.name == topic)
            case .raw:
                #expect(!topic.hasPrefix("coaty/"))
            case .invalid(let error):
                #expect(topic.hasPrefix("coaty/"))
                #expect(!error.description.isEmpty)
            }
        }
    }

    @Test("the byte-level matcher agrees with a reference implementation")
    func matcherAgreesWithReference() async {
        await propertyCheck(count: 5000, input: RandomTopics.topicAndFilter) { pair in
            let (topic, filter) = (pair[0], pair[1])
            #expect(
                MQTTTopicFilter.matches(topic: topic, filter: filter) == referenceMatches(topic: topic, filter: filter),
                "\(filter) vs \(topic)"
            )
        }
    }
}
