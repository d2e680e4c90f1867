import CoatyMQTT
import Testing

@Test func linksLibmosquitto() {
    #expect(libmosquittoVersion >= 1_006_000)
}
