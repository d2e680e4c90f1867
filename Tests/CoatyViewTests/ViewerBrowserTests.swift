import AgentProcessTestSupport
import CoatyKit
import CoatyLocalBroker
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `coaty view` as a person uses it: a real mosquitto, CoatyKit agents and the real Coaty JS peer, the viewer
/// process, and a real headless Chromium that opens the page and reads what it shows.
///
/// With `COATY_VIEW_SCREENSHOTS=DIR` it also saves a PNG of each view there (Scripts/view-screenshots).
@Suite(
    "coaty view in a headless Chromium",
    .enabled(if: BrowserAvailability.shouldRun, Comment(rawValue: BrowserAvailability.skipReason)),
    .enabled(if: CoatyJSInstallation.shouldRun, Comment(rawValue: CoatyJSInstallation.skipReason))
)
struct ViewerBrowserTests {
    static let screenshots = ProcessInfo.processInfo.environment["COATY_VIEW_SCREENSHOTS"]

    func light(_ name: String, id: CoatyUUID = CoatyUUID()) -> String {
        #"{"objectType":"com.example.Light","coreType":"CoatyObject","objectId":"\#(id)","name":"\#(name)","on":true}"#
    }

    func save(_ browser: WebDriver, _ name: String) async throws {
        guard let directory = Self.screenshots else { return }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try await browser.screenshot().write(to: URL(fileURLWithPath: "\(directory)/\(name).png"))
    }

    /// For the screenshots only: 20 s of a temperature sensor advertising at a varying rate, and a Discover each
    /// second, so the charts have something to show.
    /// - Returns: How many Discovers it sent.
    func makeTraffic(url: String) async throws -> Int {
        let sensor = CoatyUUID()
        let client = MQTTClient(configuration: try MQTTConfiguration(url: url, clientId: "temperature-sensor"))
        try await client.connect()
        let identity = #"{"object":{"objectType":"coaty.Identity","coreType":"Identity","objectId":"\#(sensor)","name":"Temperature sensor"}}"#
        try await client.publish("coaty/3/-/ADV:Identity/\(sensor)", payload: Array(identity.utf8), qos: .atLeastOnce)
        let dashboard = try CommunicationManager.mqtt(url: url, identity: Identity(name: "Dashboard"))
        try await dashboard.start()
        let start = ContinuousClock.now
        var (tick, discovers) = (0, 0)
        while ContinuousClock.now - start < .seconds(20) {
            let rate = Int(40 + 30 * sin(Double(tick) / 15))
            for index in 0..<(rate / 10) {
                let reading = 20 + 3 * sin(Double(tick + index) / 20)
                let object = #"{"object":{"objectType":"com.example.Temperature","coreType":"CoatyObject","objectId":"\#(CoatyUUID())","name":"Kitchen","celsius":\#(reading)}}"#
                try await client.publish("coaty/3/-/ADV::com.example.Temperature/\(sensor)", payload: Array(object.utf8))
            }
            if tick % 10 == 0 {
                discovers += 1
                for try await _ in dashboard.publishDiscover(.objectTypes(["com.example.Light"]))
                    .responses(timeout: .milliseconds(300))
                {}
            }
            tick += 1
            try await Task.sleep(for: .milliseconds(100))
        }
        await client.disconnect()
        await dashboard.stop()
        return discovers
    }

    @Test(
        "agents by name, an object type's count, a Discover from the form answered, live charts, a killed agent left, the broker's restart"
    )
    func aPersonWatchesTheNetwork() async throws {
        let coaty = try builtExecutable(named: "coaty")
        let (node, script) = try CoatyJSInstallation.requireInstalled()
        try await withBroker { broker in
            let url = broker.url
            // Online before the viewer: it finds it by its Discover for identities.
            let service = try TestProcess(
                executable: coaty,
                [
                    "respond", "discover", "--broker", url, "--name", "Light service",
                    "--objects", "[\(light("Lamp in the hall")),\(light("Desk lamp"))]",
                ]
            )
            defer { service.signal(SIGKILL) }
            try await Task.sleep(for: .seconds(1))
            let viewer = try TestProcess(executable: coaty, ["view", "--broker", url, "--http-port", "0"])
            defer { viewer.signal(SIGKILL) }
            let line = try #require(await viewer.stderrLine(containing: "Viewing the Coaty network", timeout: 30))
            let port = try #require(line.split(separator: ":").last.flatMap { Int($0.prefix { $0.isNumber }) })
            let page = "http://127.0.0.1:\(port)/"
            // Joins while the viewer watches: the Coaty JS peer, advertising a light and staying.
            let peer = try TestProcess(
                executable: node,
                [
                    script, "advertise", "--broker", url, "--name", "Coaty JS lamp", "--stay", "--timeout", "300",
                    "--objects", light("Coaty JS lamp"),
                ]
            )
            defer { peer.signal(SIGKILL) }
            for index in 1...3 {
                let advertised = try TestProcess(
                    executable: coaty,
                    ["advertise", "--broker", url, "--name", "Lamp controller", light("Lamp \(index)")]
                )
                #expect(await advertised.finish().status == 0)
            }
            // A bad payload on a Coaty topic: counted and shown, nothing else changes.
            let publisher = MQTTClient(configuration: try MQTTConfiguration(url: url, clientId: "bad-publisher"))
            try await publisher.connect()
            try await publisher.publish(
                "coaty/3/-/ADV::com.example.Light/\(CoatyUUID())",
                payload: Array("{not json".utf8),
                qos: .atLeastOnce
            )
            await publisher.disconnect()

            // Each Discover of the traffic is resolved with the service's two lights.
            let resolvedLights = Self.screenshots == nil ? 0 : 2 * (try await makeTraffic(url: url))

            let browser = try await WebDriver()
            do {
                try await browser.open(page + "#agents")
                try await browser.waitForTexts("#status") { $0 == ["online"] }
                let names = try await browser.waitForTexts("tr.agent td.agent-name") { names in
                    ["Light service", "Coaty JS lamp", "coaty view"].allSatisfy(names.contains)
                }
                #expect(names.filter { $0 == "Lamp controller" }.count == 3, "\(names)")
                try await browser.waitForTexts("#total-invalid") { $0 == ["1"] }
                try await save(browser, "view-agents")

                try await browser.click("#tab-objects")
                // 3 from coaty advertise, 1 from Coaty JS (and those the screenshots' Discovers resolved).
                let lights = "\(4 + resolvedLights)"
                try await browser.waitForTexts("tr.type[data-object-type='com.example.Light'] td.type-count") {
                    $0 == [lights]
                }
                try await browser.click("tr.type[data-object-type='com.example.Light']")
                try await browser.waitForTexts("#type-detail") { $0.first?.contains("Lamp 3") == true }
                try await save(browser, "view-objects")

                try await browser.click("#tab-ask")
                try await browser.type("com.example.Light", into: "#ask-object-types")
                try await browser.type("1000", into: "#ask-timeout")
                try await browser.click("#ask-send")
                let answers = try await browser.waitForTexts("tr.answer td.answer-name") { names in
                    names.contains("Lamp in the hall") && names.contains("Desk lamp")
                }
                #expect(answers.count == 2)
                let responders = try await browser.texts("tr.answer td.answer-responder")
                #expect(Set(responders) == ["Light service"])
                // One Resolve per object: Resolve carries one object.
                try await browser.waitForTexts("#ask-summary") { $0.first?.hasPrefix("2 responses") == true }
                try await save(browser, "view-ask")
                // A Query without a type list: the server's clear error, shown in the form.
                try await browser.type("", into: "#ask-object-types")
                try await browser.click("#ask-kind option[value='query']")
                try await browser.click("#ask-send")
                try await browser.waitForTexts("#ask-error") { $0.first?.contains("objectTypes") == true }

                try await browser.click("#tab-events")
                try await browser.waitForTexts("tr.event td.event-type") { $0.contains("Discover") && $0.contains("Resolve") }
                try await browser.type("Resolve", into: "#event-filter")
                // Rows filtered out are hidden: their text is empty, as a person sees it.
                let filtered = try await browser.waitForTexts("tr.event td.event-type") { types in
                    let shown = types.filter { !$0.isEmpty }
                    return !shown.isEmpty && shown.allSatisfy { $0 == "Resolve" }
                }
                #expect(filtered.count > filtered.filter { !$0.isEmpty }.count, "other events are hidden, not gone")
                try await browser.type("", into: "#event-filter")
                try await browser.waitForTexts("tr.event td.event-type") { $0.contains("Advertise") && $0.contains("Resolve") }
                try await save(browser, "view-events")

                try await browser.click("#tab-charts")
                let points = try await browser.script(
                    ##"return Array.from(document.querySelectorAll("#rate-chart polyline.series")).map(p => p.getAttribute("points") || "");"##
                )
                let series = points.arrayValue?.compactMap(\.stringValue) ?? []
                #expect(!series.isEmpty && series.allSatisfy { !$0.isEmpty }, "\(series)")
                let latencies = try await browser.waitForTexts("#latency-table") { $0.first?.contains("Discover") == true }
                #expect(!latencies.isEmpty)
                try await save(browser, "view-charts")

                // The Coaty JS peer killed: the broker publishes its last will; the page shows it left.
                peer.signal(SIGKILL)
                try await browser.click("#tab-agents")
                try await browser.waitForTexts(#"tr.agent"#) { rows in
                    rows.contains { $0.hasPrefix("Coaty JS lamp") && $0.contains("left") }
                }
                try await save(browser, "view-agent-killed")

                // The broker goes and comes back: offline, then online again by itself.
                await broker.stop()
                try await browser.waitForTexts("#status", within: 20) { $0 == ["offline"] }
                try await save(browser, "view-offline")
                try await broker.start()
                try await browser.waitForTexts("#status", within: 30) { $0 == ["online"] }
                await browser.quit()
            } catch {
                try? await save(browser, "view-failure")
                await browser.quit()
                throw error
            }
            viewer.signal(SIGTERM)
            let result = await viewer.finish(timeout: 20)
            #expect(result.status == 0, "coaty view: \(result.stderr)")
        }
    }
}
