import CoatyCore
import Testing

@Suite("Broker types: topics RabbitMQ delivers with '/' for '.' are read back")
struct BrokerTypeTests {
    let s = TopicIds.source
    let c = TopicIds.correlation

    /// The topic as RabbitMQ's MQTT plugin delivers it: every '.' becomes '/'.
    func rewritten(_ topic: String) -> String { String(topic.map { $0 == "." ? "/" : $0 }) }

    @Test("every dotted level is restored: object types, channel ids, operations, IO contexts, namespaces")
    func restoresDottedLevels() throws {
        let originals = [
            "coaty/3/-/ADV::com.example.Light/\(s)",
            "coaty/3/-/UPD::com.example.Light/\(s)/\(c)",
            "coaty/3/-/CHN:com.example.lamps/\(s)",
            "coaty/3/-/CLL:com.example.lamps.switch/\(s)/\(c)",
            "coaty/3/-/ASC:com.example.Lighting/\(s)",
            "coaty/3/my.site.a/ADV::com.example.Light/\(s)",
            "coaty/3/my.site/DSC/\(s)/\(c)",
            "coaty/3/a.b/CLL:x.y.z/\(s)/\(c)",
            "coaty/3/-/ADV::com.example.v2:Light/\(s)",
            "coaty/3/ns.DSC/CHN:DSC.x/\(s)",
        ]
        for original in originals {
            let delivered = rewritten(original)
            #expect(delivered != original)
            #expect(throws: CoatyTopicError.self) { try CoatyTopic(parsing: delivered) }
            let restored = try #require(CoatyTopic.restoringRewrittenDots(delivered), "\(delivered)")
            #expect(restored.name == original)
            #expect(restored == (try CoatyTopic(parsing: original)))
        }
        let light = try #require(CoatyTopic.restoringRewrittenDots("coaty/3/-/ADV::com/example/Light/\(s)"))
        #expect(light.objectType == "com.example.Light")
        #expect(light.sourceId == Substring(s))
    }

    @Test("topics without dots are returned as they are; topics no Coaty topic can explain are refused")
    func refusesWhatNoTopicExplains() {
        let plain = "coaty/3/-/ADV:Task/\(s)"
        #expect(CoatyTopic.restoringRewrittenDots(plain)?.name == plain)
        for topic in [
            "coaty/3/-/XYZ/abc/\(s)",  // no event code
            "coaty/3/-/ADV::com/example/Light/not-a-uuid",  // no source id
            "coaty/3/-/DSC/x/\(s)",  // a two-way event with one id
            "coaty/4/-/ADV::com/example/Light/\(s)",  // another protocol version
            "sensors/a/b/c/d/e",
            "coaty/3/" + Array(repeating: "ADV:Task", count: 2000).joined(separator: "/") + "/\(s)",
        ] {
            #expect(CoatyTopic.restoringRewrittenDots(topic) == nil, "\(topic.prefix(60))")
        }
    }

    @Test("names: standard and rabbitmq, case-insensitive; only RabbitMQ rewrites dots")
    func names() {
        #expect(BrokerType(name: "RabbitMQ") == .rabbitMQ)
        #expect(BrokerType(name: "standard") == .standard)
        #expect(BrokerType(name: "emqx") == nil)
        #expect(BrokerType.rabbitMQ.rewritesDotsInTopics)
        #expect(!BrokerType.standard.rewritesDotsInTopics)
        #expect("\(BrokerType.rabbitMQ)" == "rabbitmq")
    }

    @Test("the configuration reads communication.brokerType and COATY_BROKER_TYPE, and refuses unknown types")
    func configuration() throws {
        let file = try AgentConfiguration(json: ["communication": ["brokerType": "rabbitmq"]])
        #expect(file.brokerType == .rabbitMQ)
        #expect(file.communicationOptions.brokerType == .rabbitMQ)
        #expect(file.json.objectValue?["communication"]?.objectValue?["brokerType"] == "rabbitmq")
        var environment = AgentConfiguration()
        try environment.applyEnvironment(["COATY_BROKER_TYPE": "RABBITMQ"])
        #expect(environment.brokerType == .rabbitMQ)
        #expect(AgentConfiguration().communicationOptions.brokerType == .standard)
        #expect(AgentConfiguration().json.objectValue?["communication"]?.objectValue?["brokerType"] == nil)
        let error = #expect(throws: AgentConfigurationError.self) {
            try AgentConfiguration(json: ["communication": ["brokerType": "emqx"]])
        }
        #expect("\(error.map { "\($0)" } ?? "")".contains("standard or rabbitmq"))
    }
}
