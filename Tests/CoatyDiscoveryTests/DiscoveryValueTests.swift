import Testing

@testable import CoatyDiscovery

@Suite("DNS-SD values without a daemon")
struct DiscoveryValueTests {
    @Test("a TXT record round-trips, as length-prefixed key=value strings")
    func txtRecordRoundTrips() throws {
        let bytes = try TXTRecord.encode([("ws-port", "9883"), ("path", "/mqtt")])
        #expect(bytes == [12] + Array("ws-port=9883".utf8) + [10] + Array("path=/mqtt".utf8))
        #expect(TXTRecord.decode(bytes) == ["ws-port": "9883", "path": "/mqtt"])
    }

    @Test(
        "TXT decoding: keys are case-insensitive, the first wins, a bare key is empty, a truncated entry ends it",
        arguments: [
            ([7] + Array("WS-PORT".utf8) + [4] + Array("ws-p".utf8), ["ws-port": "", "ws-p": ""]),
            ([6] + Array("a=1=2x".utf8) + [3] + Array("A=3".utf8), ["a": "1=2x"]),
            ([0, 3] + Array("k=v".utf8) + [9] + Array("x=".utf8), ["k": "v"]),
            ([1] + Array("=".utf8), [:]),
        ] as [([UInt8], [String: String])]
    )
    func txtRecordDecoding(bytes: [UInt8], expected: [String: String]) {
        #expect(TXTRecord.decode(bytes) == expected)
    }

    @Test("a TXT entry over 255 bytes or a key with '=' is refused")
    func txtRecordLimits() {
        #expect(throws: BrokerDiscoveryError.self) { try TXTRecord.encode([("k", String(repeating: "v", count: 254))]) }
        #expect(throws: BrokerDiscoveryError.self) { try TXTRecord.encode([("a=b", "c")]) }
        #expect(throws: BrokerDiscoveryError.self) { try TXTRecord.encode([("", "c")]) }
    }

    @Test("endpoint URLs: IPv4 as it is, IPv6 in brackets, no WebSocket URL without a port")
    func endpointURLs() {
        let v4 = BrokerEndpoint(name: "b", host: "10.0.0.2", hostName: "pi.local", port: 1883, webSocketPort: 9001)
        #expect(v4.url == "mqtt://10.0.0.2:1883")
        #expect(v4.webSocketURL == "ws://10.0.0.2:9001")
        let v6 = BrokerEndpoint(name: "b", host: "fe80::1", hostName: "pi.local", port: 1884, webSocketPort: nil)
        #expect(v6.url == "mqtt://[fe80::1]:1884")
        #expect(v6.webSocketURL == nil)
    }

    @Test(
        "a host target is an address or a name",
        arguments: [
            ("127.0.0.1", true), ("192.168.1.20", true), ("::1", true), ("pi.local", false), ("1.2.3", false),
            ("256.1.1.1", false),
        ]
    )
    func hostTargets(host: String, isAddress: Bool) {
        #expect(BrokerDiscovery.isIPAddress(host) == isAddress)
    }

    @Test("publishing refuses an empty or over-long name and ports out of range before asking a daemon")
    func invalidArgumentsAreRefused() async throws {
        let discovery = BrokerDiscovery()
        await #expect(throws: BrokerDiscoveryError.self) { try await discovery.publish(name: "") }
        await #expect(throws: BrokerDiscoveryError.self) {
            try await discovery.publish(name: String(repeating: "n", count: 64))
        }
        await #expect(throws: BrokerDiscoveryError.self) { try await discovery.publish(name: "b", port: 0) }
        await #expect(throws: BrokerDiscoveryError.self) {
            try await discovery.publish(name: "b", webSocketPort: 70_000)
        }
    }

    @Test("an address as the host target (Coaty JS's bonjour takes one) is refused by Avahi with a clear error")
    func addressHostTargetIsRefusedOnLinux() async throws {
        #if os(Linux)
            let error = await #expect(throws: BrokerDiscoveryError.self) {
                try await BrokerDiscovery().publish(name: "b", port: 1883, host: "127.0.0.1")
            }
            #expect(error?.description.contains("avahi-daemon cannot publish an address") == true)
        #endif
    }

    @Test("the daemon's absence is named: avahi-daemon on Linux")
    func daemonUnavailableMessage() {
        #if os(Linux)
            #expect(BrokerDiscoveryError.daemonUnavailable.description.contains("avahi-daemon"))
        #endif
        #expect(
            BrokerDiscoveryError.failure(of: .browse(type: "_coaty-mqtt._tcp"), code: -65563) == .daemonUnavailable
        )
    }
}
